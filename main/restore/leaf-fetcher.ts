import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { CarFormatError, cidText, UncheckedCarBlock } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import { EntryNotRestoredError } from './entry-not-restored.ts';
import type { LeafPart } from './file-bytes.ts';
import { receiveBlocks, unavailableBlockReason } from './receive-blocks.ts';
import type { UnavailableBlockReport } from './verify-version.ts';

// The leaves a restore writes, fetched ahead of the writes in batches through blocks/car (each
// block checked against its CID by readCar). The restore's leaf reads, in order, come from a
// lazy walk of the tree, so nothing here grows with the number of files: a batch is the next
// reads, across small files too, capped in count and bytes, and the next batch is fetched while
// files are written from this one. A read waits for its own leaf only, not for its whole batch
// (nor, as before, for the batch after it): a leaf is written soon after it arrives, and cold
// restores of the bench set peaked 30 MB lower (216-248 MB against 247-277 MB, seven pairs).
// A leaf read again soon (a file stored twice) is fetched once; one read again much later is
// fetched again, so a repeated folder does not pin its leaves.
// Leaves from LARGE_LEAF_BYTES on are handed on unchecked: the file writer hashes its copy of
// them off the engine's thread (file-output.ts).

/** At most this many leaves, and this many bytes, per blocks/car request. */
const LEAF_BATCH = 256;
const LEAF_BATCH_BYTES = 8 * 1024 * 1024;
const MAX_BLOCK_BYTES = 4 * 1024 * 1024;
/**
 * Leaves at least this large come unchecked, for their writer to check. Hashing a few KiB on
 * this thread costs less than handing it to a worker.
 */
const LARGE_LEAF_BYTES = 64 * 1024;

/**
 * Bytes of leaves asked for and not yet taken that a file may have ahead of it before it must
 * wait for the files before it. Lower (one batch) made the second of two large files wait for
 * the first, and restores 10 % slower.
 */
const AHEAD_BYTES = 32 * 1024 * 1024;
/**
 * Bytes of leaves asked for and not yet taken below which the next batch is asked for: one
 * batch arriving while the one before it is written.
 */
const PREFETCH_BELOW_BYTES = 2 * LEAF_BATCH_BYTES;
/**
 * What a leaf held counts as, at least, in those bytes: its promise, closures and buffer cost
 * about a kilobyte of heap whatever its size. Counted by its size alone, a small file's leaf
 * cost nearly nothing, and a restore of 100 000 small files fetched every leaf ahead of the
 * writes: 70 000 held 8 s in, and a peak RSS of 354-451 MB.
 */
const HELD_LEAF_MIN_BYTES = 4096;
/**
 * Batches asked for and not yet received, at most, for the next batch to be asked for ahead of
 * the reads: with tiny files, the bytes alone would let thousands of leaves be planned ahead.
 */
const PREFETCH_BATCHES = 2;

interface FetchedLeaf {
  /**
   * Its bytes as they arrived, checked or not; undefined until it arrives, or when the host
   * could not give it back.
   */
  bytes: LeafPart | undefined;
  /**
   * What it counts in `heldBytes` until its last read is taken: its size as the tree states it,
   * at least HELD_LEAF_MIN_BYTES.
   */
  readonly held: number;
  /** Planned reads of this leaf not yet taken. */
  reads: number;
  /** Why the host could not give it back, for the user; the file needing it is left out. */
  unavailable?: string;
  /**
   * Resolves once it arrived, or its batch ended without it; rejects when its batch failed
   * before it came. A read waits for its own leaf, not for the whole batch it is in.
   */
  readonly settled: Promise<void>;
  readonly settle: (error?: Error) => void;
}

function pendingLeaf(held: number): FetchedLeaf {
  let settle: (error?: Error) => void = () => undefined;
  const settled = new Promise<void>((resolve, reject) => {
    settle = (error) => (error ? reject(error) : resolve());
  });
  // Handled by the read that takes it; a leaf no read waits for yet must not count as unhandled.
  settled.catch(() => undefined);
  return { bytes: undefined, held, reads: 1, settled, settle };
}

export class LeafFetcher {
  /**
   * Leaves, by CID text, that came back damaged and then whole when asked for again: only those
   * checked as they arrive (smaller than LARGE_LEAF_BYTES); the others are checked as written.
   */
  readonly wholeOnRetry: string[] = [];
  /** Leaves the host could not give back whole: the files needing them are not restored. */
  readonly unavailable: UnavailableBlockReport[] = [];
  private readonly fetched = new Map<string, FetchedLeaf>();
  /** Bytes of the leaves in `fetched`: asked for, arrived or not, and not yet taken. */
  private heldBytes = 0;
  /** The next planned read not yet in a batch. */
  private lookahead: IteratorResult<string>;
  /** How many planned reads are in batches so far. */
  private planned = 0;
  /** Batches are received one after another; this is the last one asked for. */
  private fetching: Promise<void> = Promise.resolve();
  /** Batches asked for whose answers have not yet settled. */
  private batchesAhead = 0;
  /** The first planned read not yet taken, and reads taken after it (out of order). */
  private firstUntaken = 0;
  private readonly takenAhead = new Set<number>();
  /** Waiters for the next take, or for stop. */
  private wakeUps: Array<() => void> = [];
  private stopped: Error | undefined;
  /**
   * Fires on close: a batch still being fetched is cut off, and a retry of it waits no more.
   * Else, after a restore that failed, its retries went on against the service the restore's
   * end had closed, and held the process (`canopy restore` onto a disk that filled up) some
   * 20 s after its error was told.
   */
  private readonly halt = new AbortController();
  /** The client, stopped by `halt` too; made by the first batch (a restore may fetch none). */
  private haltedClient: ServiceClient | undefined;

  constructor(
    private readonly client: ServiceClient,
    private readonly storageHost: string,
    /** Leaf CID → size, to cap a batch in bytes before asking for it. */
    private readonly leafSizes: { sizeOfText(text: string): number | undefined },
    /** Every leaf read the restore will make, in order, by CID text. */
    private readonly reads: Iterator<string>,
  ) {
    this.lookahead = reads.next();
  }

  /**
   * The bytes of the leaf that is planned read number `read` (counted from 0 in the order of
   * `reads`), once that leaf has arrived. Reads may come out of order across files written at
   * once, never past the plan. A leaf the host sent damaged or no longer holds rejects with
   * EntryNotRestoredError, once the read counts as taken: the reads after it go on.
   */
  async take(cid: CID, read: number): Promise<LeafPart> {
    while (this.planned <= read && this.lookahead.done !== true) {
      if (this.stopped) throw this.stopped;
      // A file far ahead of the first unfinished one waits for it, rather than have every leaf
      // in between (a large file's) fetched and held. The first untaken read always goes on,
      // so the restore cannot stall.
      if (read !== this.firstUntaken && this.heldBytes >= AHEAD_BYTES) {
        await new Promise<void>((resolve) => this.wakeUps.push(resolve));
        continue;
      }
      this.askForNextBatch();
    }
    const key = cidText(cid);
    const leaf = this.fetched.get(key);
    if (leaf === undefined)
      throw new EngineError('protocol', `block ${key} did not come back from the server`);
    await leaf.settled;
    const { bytes, unavailable } = leaf;
    if (bytes === undefined && unavailable === undefined)
      throw new EngineError('protocol', `block ${key} did not come back from the server`);
    leaf.reads -= 1;
    if (leaf.reads <= 0) {
      this.fetched.delete(key);
      this.heldBytes -= leaf.held;
    }
    this.takenAhead.add(read);
    while (this.takenAhead.delete(this.firstUntaken)) this.firstUntaken += 1;
    this.wake();
    if (this.heldBytes < PREFETCH_BELOW_BYTES && this.batchesAhead < PREFETCH_BATCHES)
      this.askForNextBatch();
    if (bytes === undefined) throw new EntryNotRestoredError(unavailable ?? '');
    return bytes;
  }

  /** Ends the restore early: takes waiting for earlier files fail with `reason`. */
  stop(reason: Error): void {
    this.stopped ??= reason;
    this.wake();
  }

  /**
   * Cuts off what is still being fetched, once no read is waiting: the restore is over. Not on
   * stop, when files whose leaves are on their way are still written whole.
   */
  close(): void {
    this.stop(new Error('the restore is over'));
    this.halt.abort(this.stopped);
  }

  private wake(): void {
    const wakeUps = this.wakeUps;
    this.wakeUps = [];
    for (const wakeUp of wakeUps) wakeUp();
  }

  /**
   * Plans the next batch of reads now, so reads in it wait for their own leaves, and asks for
   * it once the batches before it are received. A failure reaches the reads of the leaves it
   * did not bring.
   */
  private askForNextBatch(): void {
    /** The batch's leaves by CID text: those this answer settles, whatever `fetched` holds later. */
    const batch = new Map<string, FetchedLeaf>();
    let batchBytes = 0;
    while (this.lookahead.done !== true && batch.size < LEAF_BATCH) {
      const key = this.lookahead.value;
      const known = this.fetched.get(key);
      if (known) known.reads += 1;
      else {
        const size = this.leafSizes.sizeOfText(key) ?? 0;
        if (batch.size > 0 && batchBytes + size > LEAF_BATCH_BYTES) break;
        batchBytes += size;
        const held = Math.max(size, HELD_LEAF_MIN_BYTES);
        const leaf = pendingLeaf(held);
        batch.set(key, leaf);
        this.fetched.set(key, leaf);
        this.heldBytes += held;
      }
      this.planned += 1;
      this.lookahead = this.reads.next();
    }
    if (batch.size === 0) return;
    this.batchesAhead += 1;
    this.fetching = this.fetching.then(async () => {
      try {
        // After a failure, the batches asked for behind it are not asked of the host at all.
        if (this.stopped) throw this.stopped;
        await this.receive(batch);
        for (const leaf of batch.values()) leaf.settle();
      } catch (error) {
        const failure = error instanceof Error ? error : new Error(String(error));
        this.stopped ??= failure;
        for (const leaf of batch.values()) leaf.settle(failure);
        this.wake();
      } finally {
        this.batchesAhead -= 1;
      }
    });
  }

  private async receive(batch: ReadonlyMap<string, FetchedLeaf>): Promise<void> {
    try {
      this.haltedClient ??= this.client.stoppedBy(this.halt.signal);
      await receiveBlocks(
        this.haltedClient,
        this.storageHost,
        [...batch.keys()],
        { maxBlockBytes: MAX_BLOCK_BYTES, uncheckedFrom: LARGE_LEAF_BYTES },
        {
          onBlock: (key, block) => {
            const leaf = batch.get(key);
            if (!leaf) return;
            leaf.bytes = block instanceof UncheckedCarBlock ? block : block.pieces;
            leaf.settle();
          },
          onUnavailable: (key, why) => {
            const leaf = batch.get(key);
            if (!leaf) return;
            this.unavailable.push({ cid: key, why });
            leaf.unavailable = unavailableBlockReason(key, why);
            leaf.settle();
          },
          onWholeAgain: (key) => this.wholeOnRetry.push(key),
        },
      );
    } catch (error) {
      if (error instanceof CarFormatError) {
        throw new EngineError(
          'protocol',
          `the server sent a damaged block (${error.message}); restore stopped`,
          { cause: error },
        );
      }
      throw error;
    }
  }
}
