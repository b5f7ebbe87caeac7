import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { CarFormatError, cidText, UncheckedCarBlock } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import { EntryNotRestoredError } from './entry-not-restored.ts';
import type { FilePart } from './file-bytes.ts';
import { receiveBlocks } from './receive-blocks.ts';

// The leaves a restore writes, fetched ahead of the writes in batches through blocks/car (each
// block checked against its CID by readCar). The restore's leaf reads, in order, come from a
// lazy walk of the tree, so nothing here grows with the number of files: a batch is the next
// reads, across small files too, capped in count and bytes, and the next batch is fetched while
// files are written from this one. A leaf read again soon (a file stored twice) is fetched once;
// one read again much later is fetched again, so a repeated folder does not pin its leaves.
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

/** Why a file was left out: the server sent other bytes for one of its leaves. */
export function damagedLeafReason(cid: string): string {
  return `block ${cid} came back from the server damaged`;
}
/**
 * Fetched leaves a file may have waiting before it must wait for the files before it. Lower
 * (one batch) made the second of two large files wait for the first, and restores 10 % slower.
 */
const AHEAD_BYTES = 32 * 1024 * 1024;
interface FetchedLeaf {
  /**
   * Its bytes as they arrived, checked or not; undefined while its batch is on the way, or when
   * the host could not give it back.
   */
  bytes: FilePart | undefined;
  /** The bytes in `bytes`. */
  size: number;
  /** Planned reads of this leaf not yet taken. */
  reads: number;
  /** Why the host could not give it back, for the user; the file needing it is left out. */
  unavailable?: string;
}

export class LeafFetcher {
  private readonly fetched = new Map<string, FetchedLeaf>();
  private fetchedBytes = 0;
  /** The next planned read not yet in a batch. */
  private lookahead: IteratorResult<string>;
  /** How many planned reads are in batches so far. */
  private planned = 0;
  /** Batches run one after another; this is the last one asked for. */
  private fetching: Promise<void> = Promise.resolve();
  private prefetching = false;
  /** The first planned read not yet taken, and reads taken after it (out of order). */
  private firstUntaken = 0;
  private readonly takenAhead = new Set<number>();
  /** Waiters for the next take, or for stop. */
  private wakeUps: Array<() => void> = [];
  private stopped: Error | undefined;

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
   * `reads`). Reads may come out of order across files written at once, never past the plan.
   * A leaf the host sent damaged or no longer holds rejects with EntryNotRestoredError, once
   * the read counts as taken: the reads after it go on.
   */
  async take(cid: CID, read: number): Promise<FilePart> {
    while (this.planned <= read && this.lookahead.done !== true) {
      if (this.stopped) throw this.stopped;
      // A file far ahead of the first unfinished one waits for it, rather than have every leaf
      // in between (a large file's) fetched and held. The first untaken read always goes on,
      // so the restore cannot stall.
      if (read !== this.firstUntaken && this.fetchedBytes >= AHEAD_BYTES) {
        await new Promise<void>((resolve) => this.wakeUps.push(resolve));
        continue;
      }
      this.fetching = this.fetching.then(() =>
        this.planned <= read ? this.fetchNextBatch() : undefined,
      );
      await this.fetching;
    }
    // A batch asked for earlier may still carry this leaf.
    await this.fetching;
    const key = cidText(cid);
    const leaf = this.fetched.get(key);
    if (leaf === undefined || (leaf.bytes === undefined && leaf.unavailable === undefined))
      throw new EngineError('protocol', `block ${key} did not come back from the server`);
    const { bytes, unavailable } = leaf;
    leaf.reads -= 1;
    if (leaf.reads <= 0) {
      this.fetched.delete(key);
      this.fetchedBytes -= leaf.size;
    }
    this.takenAhead.add(read);
    while (this.takenAhead.delete(this.firstUntaken)) this.firstUntaken += 1;
    this.wake();
    this.prefetch();
    if (bytes === undefined) throw new EntryNotRestoredError(unavailable ?? '');
    return bytes;
  }

  /** Ends the restore early: takes waiting for earlier files fail with `reason`. */
  stop(reason: Error): void {
    this.stopped ??= reason;
    this.wake();
  }

  private wake(): void {
    const wakeUps = this.wakeUps;
    this.wakeUps = [];
    for (const wakeUp of wakeUps) wakeUp();
  }

  /** Starts on the next batch once less than one batch is left waiting to be written. */
  private prefetch(): void {
    if (this.prefetching || this.lookahead.done === true || this.fetchedBytes >= LEAF_BATCH_BYTES)
      return;
    this.prefetching = true;
    this.fetching = this.fetching.then(async () => {
      try {
        await this.fetchNextBatch();
      } finally {
        this.prefetching = false;
      }
    });
    // A failure surfaces to the next take, which waits on `fetching`.
    this.fetching.catch(() => undefined);
  }

  private async fetchNextBatch(): Promise<void> {
    const batch: string[] = [];
    let batchBytes = 0;
    while (this.lookahead.done !== true && batch.length < LEAF_BATCH) {
      const key = this.lookahead.value;
      const known = this.fetched.get(key);
      if (known) known.reads += 1;
      else {
        const size = this.leafSizes.sizeOfText(key) ?? 0;
        if (batch.length > 0 && batchBytes + size > LEAF_BATCH_BYTES) break;
        batchBytes += size;
        batch.push(key);
        this.fetched.set(key, { bytes: undefined, size: 0, reads: 1 });
      }
      this.planned += 1;
      this.lookahead = this.reads.next();
    }
    if (batch.length === 0) return;
    try {
      await receiveBlocks(
        this.client,
        this.storageHost,
        batch,
        { maxBlockBytes: MAX_BLOCK_BYTES, uncheckedFrom: LARGE_LEAF_BYTES },
        (key, block) => {
          const leaf = this.fetched.get(key);
          if (!leaf) return;
          leaf.bytes = block instanceof UncheckedCarBlock ? block : block.pieces;
          leaf.size = block.length;
          this.fetchedBytes += block.length;
        },
        (key, why) => {
          const leaf = this.fetched.get(key);
          if (leaf)
            leaf.unavailable =
              why === 'damaged'
                ? damagedLeafReason(key)
                : `the server no longer holds block ${key}`;
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
