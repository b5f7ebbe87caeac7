import { randomInt } from 'node:crypto';
import { EngineError } from '../api/index.ts';
import { CarFormatError, cidText } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import { PhaseProgress, type TreeLeaves, type VerifyProgress } from '../uploader/index.ts';
import { LeafSizes } from '../packer/index.ts';
import type { CID } from 'multiformats/cid';
import { leavesInTreeOrder } from './leaves-in-tree-order.ts';
import { receiveBlocks, type UnavailableBlock } from './receive-blocks.ts';

// Re-fetches a sample (or all) of a version's data blocks and checks every one against its CID,
// trusting nothing local: the proof that the version can be restored. An answer cut off on the
// way is asked again for the rest, as a restore does, so a flaky link is not taken for loss.
// A block the server no longer holds, or sends damaged, does not end the check: every one is
// found and reported, so that the files needing them can be named. One that comes back damaged
// and then whole, asked for again (receive-blocks.ts), counts as whole and is reported apart.
//
// Blocks are asked for many at a time, up to a count and a size: a device may make 200 requests
// at once and 50 a second after (§5.2), and in batches of 64 a verify of 100 000 small files
// made 1 563 requests and spent 27 of its 29 s waiting for the limit.

/** A block the server could not give back whole, by its CID's text. */
export interface UnavailableBlockReport {
  readonly cid: string;
  readonly why: UnavailableBlock;
}

export interface VerifyResult {
  readonly checked: number;
  readonly total: number;
  /** The bytes of the blocks that came back whole. */
  readonly bytes: number;
  readonly verifiedAt: number;
  /** Blocks checked that did not come back whole; empty when the version is restorable. */
  readonly unavailable: readonly UnavailableBlockReport[];
  /**
   * Blocks, by CID text, that came back damaged and then whole when asked for again: counted
   * whole, yet something on the way (the link, memory, the server's disk) damages data at times.
   */
  readonly wholeOnRetry: readonly string[];
}

/**
 * A few random blocks of a version re-fetched and checked after a backup: what they showed, or
 * why they could not be checked (the backup itself is stored either way).
 */
export type SampleCheck =
  | Pick<VerifyResult, 'checked' | 'verifiedAt' | 'unavailable' | 'wholeOnRetry'>
  | { readonly failed: string };

/** At most this many blocks, and this many bytes as the tree states them, per request. */
const BATCH_BLOCKS = 1024;
const BATCH_BYTES = 64 * 1024 * 1024;
const MAX_BLOCK_BYTES = 4 * 1024 * 1024;

/** `leaves` in order, by CID text, in batches of at most BATCH_BLOCKS and (beyond one) BATCH_BYTES. */
function* batchesOf(leaves: Iterable<{ cid: CID; size: number }>): Generator<string[]> {
  let batch: string[] = [];
  let bytes = 0;
  for (const { cid, size } of leaves) {
    if (batch.length > 0 && (batch.length === BATCH_BLOCKS || bytes + size > BATCH_BYTES)) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(cidText(cid));
    bytes += size;
  }
  if (batch.length > 0) yield batch;
}

/**
 * `count` leaves of the tree picked at random, each once, and no more than `maxBytes` of them
 * beyond the first; for 'all', all of them, in the order a restore reads them when the tree's
 * nodes are at hand.
 */
export function chosenLeaves(
  tree: TreeLeaves,
  count: number | 'all',
  maxBytes = Number.POSITIVE_INFINITY,
): Iterable<{ cid: CID; size: number }> {
  const { leaves, nodes } = tree;
  if (count === 'all' || (count >= leaves.count && maxBytes === Number.POSITIVE_INFINITY)) {
    return nodes ? { [Symbol.iterator]: () => leavesInTreeOrder({ ...tree, nodes }) } : leaves;
  }
  const picked = new Set<number>();
  const chosen: Array<{ cid: CID; size: number }> = [];
  let bytes = 0;
  while (picked.size < Math.min(count, leaves.count)) {
    const index = randomInt(leaves.count);
    if (picked.has(index)) continue;
    picked.add(index);
    const cid = leaves.cidAt(index);
    const size = leaves.sizeOf(cid) ?? MAX_BLOCK_BYTES;
    if (chosen.length > 0 && bytes + size > maxBytes) continue;
    chosen.push({ cid, size });
    bytes += size;
  }
  return chosen;
}

/** Counts what `onProgress` is told of a verify of `chosen`. */
function verifyProgress(
  chosen: Iterable<{ size: number }> | LeafSizes,
  onProgress: (progress: VerifyProgress) => void,
): PhaseProgress<'verifying'> {
  let blocks = 0;
  let bytes = 0;
  if (chosen instanceof LeafSizes) {
    // All of them: counted without walking the tree, or making each CID, for it.
    blocks = chosen.count;
    for (let index = 0; index < blocks; index++) bytes += chosen.sizeAt(index) ?? 0;
  } else {
    for (const { size } of chosen) {
      blocks += 1;
      bytes += size;
    }
  }
  // PhaseProgress counts files; here they are blocks.
  return new PhaseProgress(
    'verifying',
    blocks,
    bytes,
    (counted) =>
      onProgress({
        phase: 'verifying',
        blocksDone: counted.filesDone,
        blocksTotal: counted.filesTotal,
        bytesDone: counted.bytesDone,
        bytesTotal: counted.bytesTotal,
        etaSeconds: counted.etaSeconds,
      }),
    () => performance.now(),
  );
}

export async function verifyVersion(input: {
  client: ServiceClient;
  storageHost: string;
  /**
   * The version's leaves; with its nodes (read from its CAR file when asked for), all of them
   * are asked for in the order a restore reads them.
   */
  tree: TreeLeaves;
  sample: number | 'all';
  /** A sample's blocks come to no more than this, but its first. */
  sampleBytes?: number;
  now: () => number;
  /** Takes the blocks checked so far, at most every 200 ms and once at the end. */
  onProgress?: (progress: VerifyProgress) => void;
}): Promise<VerifyResult> {
  const { leaves } = input.tree;
  const chosen = chosenLeaves(input.tree, input.sample, input.sampleBytes);
  const counted = Array.isArray(chosen) ? chosen : leaves;
  const progress = input.onProgress && verifyProgress(counted, input.onProgress);
  let bytes = 0;
  let checked = 0;
  const unavailable: UnavailableBlockReport[] = [];
  const wholeOnRetry: string[] = [];
  const lost = (cid: string, why: UnavailableBlock): void => {
    unavailable.push({ cid, why });
    progress?.addFile();
  };
  for (const batch of batchesOf(chosen)) {
    checked += batch.length;
    try {
      const notSent = await receiveBlocks(
        input.client,
        input.storageHost,
        batch,
        { maxBlockBytes: MAX_BLOCK_BYTES },
        {
          onBlock: (_cid, block) => {
            bytes += block.length;
            progress?.addBytes(block.length);
            progress?.addFile();
          },
          onUnavailable: lost,
          onWholeAgain: (cid) => wholeOnRetry.push(cid),
        },
      );
      // Blocks a whole answer left out, against §11.5: as good as lost.
      for (const cid of notSent) lost(cid, 'missing');
    } catch (error) {
      if (error instanceof CarFormatError) {
        throw new EngineError(
          'protocol',
          `verification failed: the server sent a damaged block (${error.message})`,
          { cause: error },
        );
      }
      throw error;
    }
  }
  progress?.finish();
  return {
    checked,
    total: leaves.count,
    bytes,
    verifiedAt: input.now(),
    unavailable,
    wholeOnRetry,
  };
}
