// How large a backup's shards are: about a minute of upload each at the speed the bucket's
// last uploads achieved. A shard is what a dropped connection or a killed run sends again, and
// what a retry repeats, so on a slow link it stays small.
//
// The cap is 64 MiB, not the 256 MiB the spec allows: on a fast link larger shards would save
// little (a 1.2 GiB backup to this machine: 0.5 s), and a host or a proxy in front of it may
// take less. One that refuses a shard as too large gets smaller ones (shard-refusal.ts).

/** The upload time a shard aims at. */
export const SHARD_SECONDS = 60;
/** The largest target, and the target until a bucket's upload speed is known. */
export const MAX_SHARD_TARGET_BYTES = 64 * 1024 * 1024;
/** A few 1 MiB blocks, however slow the link. */
export const MIN_SHARD_TARGET_BYTES = 4 * 1024 * 1024;

/**
 * Shards smaller than this are not timed: their time is mostly the round trip, and a speed
 * taken from them would shrink a fast link's shards for nothing.
 */
export const TIMED_SHARD_MIN_BYTES = 1024 * 1024;

/**
 * The most blocks one shard holds, whatever their size. A host records a shard's blocks in one
 * transaction, answering nothing else meanwhile, and keeps the list in memory until then: a
 * first backup of 400 000 small files (a block each) in one shard held the embedded service,
 * and so the backup itself, for 5 s at that commit, with some 60 MB of heap. 32 768 blocks
 * still fill a shard for blocks of 2 KiB on average.
 */
export const MAX_SHARD_BLOCKS = 32_768;

/** Whether a block of `blockBytes` still goes into a shard holding `shard`. */
export function shardHasRoom(
  shard: { readonly bytes: number; readonly blocks: number },
  blockBytes: number,
  targetBytes: number,
): boolean {
  return shard.bytes + blockBytes <= targetBytes && shard.blocks < MAX_SHARD_BLOCKS;
}

/** The shard size for uploads at `bytesPerSecond`; undefined when none was observed. */
export function shardTargetFor(bytesPerSecond: number | undefined): number {
  if (bytesPerSecond === undefined || !Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0)
    return MAX_SHARD_TARGET_BYTES;
  const target = Math.round(bytesPerSecond * SHARD_SECONDS);
  return Math.min(MAX_SHARD_TARGET_BYTES, Math.max(MIN_SHARD_TARGET_BYTES, target));
}
