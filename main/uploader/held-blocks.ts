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
// costs a local read (of the whole staged shard, or of the leaves a planned one keeps), and
// saves sending the held leaves: worth it when sending them would take longer than that read.
// At the upload speed the account's last backups measured (or the user's limit): on a slow link
// a shard is made again for a few held MiB, on one as fast as the disk only for held leaves
// that outweigh the rest. While no speed is known (no upload timed yet), held leaves must make
// HELD_SHARE_WORTH_DROPPING of their shard.

/** Without a measured upload speed, the least share of a shard's bytes held leaves must make. */
export const HELD_SHARE_WORTH_DROPPING = 0.2;

/**
 * How fast a shard is taken to be read again, from its staged file or from the source, and
 * hashed: a modest disk's, so that a shard is made again only where that clearly pays. This
 * machine's packing reads several times faster.
 */
export const REREAD_BYTES_PER_SECOND = 100_000_000;

/** The held leaves of one shard to send, and what making it again without them reads. */
interface ShardCounts {
  readonly heldBytes: number;
  /** The bytes of all its leaves. */
  readonly bytes: number;
  /** What making it again reads: the staged shard whole, or the leaves a planned one keeps. */
  readonly readAgain: number;
}

/** Whether leaving the held leaves out of the shard saves more time than making it again costs. */
export function worthMakingAgain(
  { heldBytes, bytes, readAgain }: ShardCounts,
  uploadBytesPerSecond: number | undefined,
): boolean {
  if (heldBytes === 0) return false;
  if (uploadBytesPerSecond === undefined || !(uploadBytesPerSecond > 0))
    return heldBytes >= bytes * HELD_SHARE_WORTH_DROPPING;
  return heldBytes / uploadBytesPerSecond > readAgain / REREAD_BYTES_PER_SECOND;
}

/** Counts the shards made again, and their bytes (a PhaseProgress). */
export interface TrimmingProgress {
  addBytes(count: number): void;
  addFile(): void;
  finish(): void;
}

/**
 * Takes out of the shards numbered in `needed` the leaves not in `sent`, where that is worth
 * it (worthMakingAgain); returns the bytes they held. `sent` picks the leaves the shards must
 * carry: those the host lacks, and those it is to be sent again. `progressOf`, given how many
 * shards are made again and the bytes that reads, takes each one made.
 */
export async function dropHeldLeaves(
  shards: ShardPlanner | ShardWriter,
  leaves: LeafSizes,
  needed: ReadonlySet<number>,
  sent: (leaf: number) => boolean,
  options: {
    /** The folder planned shards read their blocks from. */
    readonly sourceDir: string;
    /** BackupInput.expectedUploadBytesPerSecond: undefined while no speed is known. */
    readonly uploadBytesPerSecond: number | undefined;
    readonly progressOf?: (shards: number, bytes: number) => TrimmingProgress;
  },
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
  // A staged shard is read whole, from its file; a planned one reads from the source only the
  // leaves it keeps (plannedShardBody).
  const remade = [...byShard]
    .map(([shard, counts]) => ({
      shard,
      ...counts,
      readAgain: shards instanceof ShardPlanner ? counts.bytes - counts.heldBytes : counts.bytes,
    }))
    .filter((counts) => worthMakingAgain(counts, options.uploadBytesPerSecond));
  if (remade.length === 0) return 0;
  // Making the shards again takes as long as the bytes it reads: told, as a phase of its own.
  const progress = options.progressOf?.(
    remade.length,
    remade.reduce((sum, { readAgain }) => sum + readAgain, 0),
  );
  let dropped = 0;
  for (const { shard, held, heldBytes, readAgain } of remade) {
    const cids = new Set(held.map((leaf) => cidText(leaves.cidAt(leaf))));
    try {
      await shards.dropBlocks(shard, cids, options.sourceDir);
    } catch (error) {
      // A staged shard that cannot be written again (its disk full) is left whole, as it was,
      // and goes with its held leaves: that costs bytes on the link, and loses nothing. A
      // planned one whose source changed since it was read cannot be sent either way.
      if (shards instanceof ShardPlanner) throw error;
      progress?.addBytes(readAgain);
      progress?.addFile();
      continue;
    }
    for (const leaf of held) shards.leafShards.forget(leaf);
    dropped += heldBytes;
    progress?.addBytes(readAgain);
    progress?.addFile();
  }
  progress?.finish();
  return dropped;
}
