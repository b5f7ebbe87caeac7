import { describe, expect, it } from 'vitest';
import { BLOCK_SIZES, roomOfFile, roomOnDisk } from '../../../main/restore/disk-blocks.ts';

// The room files take on a disk that stores them in whole blocks, at the least: what a restore's
// room check counts against the disk's free space.

const KiB = 1024;

describe('the room of files on a disk', () => {
  it('is whole blocks for a file, and its bytes for one small enough to sit in its inode', () => {
    expect(roomOfFile(0)).toEqual(BLOCK_SIZES.map(() => 0));
    expect(roomOfFile(160)).toEqual(BLOCK_SIZES.map(() => 160));
    expect(roomOfFile(161)).toEqual(BLOCK_SIZES);
    expect(roomOfFile(5000)).toEqual([8 * KiB, 8 * KiB, ...BLOCK_SIZES.slice(2)]);
    expect(roomOfFile(1024 * KiB + 1)[8]).toBe(2048 * KiB);
  });

  it("is counted at the largest block size not above the disk's, never less than the bytes", () => {
    // 100 files of 5000 bytes each.
    const roomAt = roomOfFile(5000).map((room) => room * 100);
    const bytes = 500_000;
    expect(roomOnDisk(roomAt, bytes, 4 * KiB)).toBe(800 * KiB);
    // An exFAT stick's clusters of 128 KiB.
    expect(roomOnDisk(roomAt, bytes, 128 * KiB)).toBe(12_800 * KiB);
    // Blocks of 48 KiB take at least what blocks of 32 KiB do.
    expect(roomOnDisk(roomAt, bytes, 48 * KiB)).toBe(3_200 * KiB);
    expect(roomOnDisk(roomAt, bytes, 4 * 1024 * KiB)).toBe(102_400 * KiB);
    // Blocks smaller than any counted: the bytes, at the least.
    expect(roomOnDisk(roomAt, bytes, 512)).toBe(bytes);
  });
});
