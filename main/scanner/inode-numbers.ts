import { statfsSync, type BigIntStats } from 'node:fs';

// The inode number tells the file index that a file is still the one it read last time (a file
// replaced by another of the same size and mtime has a new one). Some file systems make their
// inode numbers up as files are looked up, so after a remount every file has another one, and
// every backup of an external FAT or exFAT disk read all of it again. There, the index keeps 0
// and trusts size and mtime alone, as `restic --ignore-inode` does.

const MADE_UP_INODES = new Set([
  0x4d44, // MSDOS_SUPER_MAGIC: the kernel's FAT (vfat, msdos)
  0x2011bab0, // EXFAT_SUPER_MAGIC: the kernel's exFAT
  0x65735546, // FUSE_SUPER_MAGIC: exfat-fuse, ntfs-3g, sshfs, rclone (inodes stable only with use_ino)
]);

/** Inode numbers as the file index keeps them, one file system (device) looked up once. */
export class InodeNumbers {
  private readonly stableByDevice = new Map<bigint, boolean>();

  /**
   * The inode number of `stats`, or 0 where its file system makes them up. `folder` is a folder
   * on the same file system: the entry's own, or its parent's for a file or a symlink.
   */
  of(stats: Pick<BigIntStats, 'dev' | 'ino'>, folder: string): bigint {
    let stable = this.stableByDevice.get(stats.dev);
    if (stable === undefined) {
      stable = !MADE_UP_INODES.has(statfsSync(folder).type);
      this.stableByDevice.set(stats.dev, stable);
    }
    return stable ? stats.ino : 0n;
  }
}
