// What files take on a disk: whole blocks (clusters on FAT and exFAT), not their bytes. A restore
// of many small files onto a disk with large blocks fills it long before their bytes would: a
// mail folder of a million 5 kB messages takes 5 GB in bytes, and 128 GB on an exFAT stick of
// 128 KiB clusters. A tree's totals (tree-totals.ts) count its files' room for each of a few
// block sizes, in the same pass as their bytes, so that the room check knows it for whatever
// disk it meets.

/** The block sizes counted: 4 KiB (ext4, xfs, tmpfs) to 1 MiB (exFAT's largest usual cluster). */
export const BLOCK_SIZES: readonly number[] = [
  4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576,
];

/**
 * Files this small are counted as their bytes only: ext4 with `inline_data` keeps them inside
 * their inode, in no block at all, and the count must never say a restore needs more room than
 * it does.
 */
const INLINE_BYTES = 160;

/** The room a file of `size` bytes takes at each of BLOCK_SIZES, at the least. */
export function roomOfFile(size: number): number[] {
  if (size <= INLINE_BYTES) return BLOCK_SIZES.map(() => size);
  return BLOCK_SIZES.map((block) => Math.ceil(size / block) * block);
}

/**
 * The room files take on a disk of `blockSize`, at the least, from `roomAt` (their room at each
 * of BLOCK_SIZES), or `bytes` when the disk's blocks are smaller than any counted. Block sizes
 * are powers of two, so files take at least their room at the largest counted size not above
 * the disk's.
 */
export function roomOnDisk(roomAt: readonly number[], bytes: number, blockSize: number): number {
  let room = bytes;
  for (const [index, block] of BLOCK_SIZES.entries())
    if (block <= blockSize) room = Math.max(room, roomAt[index] ?? bytes);
  return room;
}
