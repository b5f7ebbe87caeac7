import { cidText } from '../protocol/index.ts';
import type { LeafSizes } from '../packer/index.ts';
import { ShardPlanner } from './shard-planner.ts';
import type { ShardWriter } from './shard-writer.ts';

// A backup lays out in shards every leaf the version it builds on lacks, before it can ask the
// host which of those the user holds already (§11.3 answers only under a pushed version's
// authorization, and pushing needs the whole tree). The host may hold many of them: a file
// back in the folder after a version without it, or the same files in another bucket of the
// user's. A shard carrying one leaf the host lacks was sent whole, with every held leaf beside
// it: a 6-byte note next to a 3 MiB photo the user held sent 3 MiB. §17.4 asks that held
// leaves be skipped.
//
// So a shard to send whose held leaves weigh enough is made again without them: a staged shard
// is written again from its file, a planned one is named anew from the source, read again. That
// costs a local read of the leaves it keeps, and saves sending the held ones; held leaves under
// HELD_SHARE_WORTH_DROPPING of a shard's bytes are sent rather than the shard made again (a 256
// MiB shard read again, to spare a few MiB on the link).

/** The least share of a shard's block bytes held leaves must make for the shard to be made again. */
export const HELD_SHARE_WORTH_DROPPING = 0.2;

/** Counts the shards made again, and their bytes (a PhaseProgress). */
export interface TrimmingProgress {
  addBytes(count: number): void;
  addFile(): void;
  finish(): void;
}

/**
 * Takes out of the shards numbered in `needed` the leaves not in `sent`, where those weigh at
 * least HELD_SHARE_WORTH_DROPPING of their shard; returns the bytes they held. `sent` picks the
 * leaves the shards must carry: those the host lacks, and those it is to be sent again.
 * `progressOf`, given how many shards are made again and their bytes, takes each one made.
 */
export async function dropHeldLeaves(
  shards: ShardPlanner | ShardWriter,
  leaves: LeafSizes,
  needed: ReadonlySet<number>,
  sent: (leaf: number) => boolean,
  /** The folder planned shards read their blocks from. */
  sourceDir: string,
  progressOf?: (shards: number, bytes: number) => TrimmingProgress,
): Promise<number> {
  const byShard = new Map<number, { held: number[]; heldBytes: number; bytes: number }>();
  for (let leaf = 0; leaf < leaves.count; leaf++) {
    const shard = shards.leafShards.shardOf(leaf);
    if (shard === undefined || !needed.has(shard)) continue;
    let counts = byShard.get(shard);
    if (!counts) {
      counts = { held: [], heldBytes: 0, bytes: 0 };
      byShard.set(shard, counts);
    }
    const size = leaves.sizeAt(leaf) ?? 0;
    counts.bytes += size;
    if (sent(leaf)) continue;
    counts.held.push(leaf);
    counts.heldBytes += size;
  }
  const remade = [...byShard].filter(
    ([, { held, heldBytes, bytes }]) =>
      held.length > 0 && heldBytes >= bytes * HELD_SHARE_WORTH_DROPPING,
  );
  if (remade.length === 0) return 0;
  // Making a shard again takes as long as the bytes it reads: told, as a phase of its own. A
  // staged shard is read whole, from its file; a planned one reads from the source only the
  // leaves it keeps (plannedShardBody).
  const bytesRead = ({ bytes, heldBytes }: { bytes: number; heldBytes: number }): number =>
    shards instanceof ShardPlanner ? bytes - heldBytes : bytes;
  const progress = progressOf?.(
    remade.length,
    remade.reduce((sum, [, counts]) => sum + bytesRead(counts), 0),
  );
  let dropped = 0;
  for (const [shard, counts] of remade) {
    const { held, heldBytes } = counts;
    const cids = new Set(held.map((leaf) => cidText(leaves.cidAt(leaf))));
    try {
      await shards.dropBlocks(shard, cids, sourceDir);
    } catch (error) {
      // A staged shard that cannot be written again (its disk full) is left whole, as it was,
      // and goes with its held leaves: that costs bytes on the link, and loses nothing. A
      // planned one whose source changed since it was read cannot be sent either way.
      if (shards instanceof ShardPlanner) throw error;
      progress?.addBytes(bytesRead(counts));
      progress?.addFile();
      continue;
    }
    for (const leaf of held) shards.leafShards.forget(leaf);
    dropped += heldBytes;
    progress?.addBytes(bytesRead(counts));
    progress?.addFile();
  }
  progress?.finish();
  return dropped;
}
