import { execFile } from 'node:child_process';
import { statfsSync, statSync } from 'node:fs';
import os from 'node:os';

// Makes many restored files durable at once. An fsync of each file costs a journal commit and a
// flush of the disk's cache: on this project's ext4 machine, 10 000 files of 1 KiB took 1.1-1.2 s
// to write fsynced eight at a time, and 0.3 s written unsynced and then flushed once per 1 000
// by syncfs(2), which commits everything the file system holds in one go. Node has no syncfs,
// so `sync -f` calls it (coreutils, and BusyBox's on small systems); starting it costs a few
// milliseconds, paid once per batch of files. A `sync` without -f fails, and the files are then
// fsynced one by one.
//
// Only where syncfs is known to put every file's data and metadata on the disk and to report a
// failed write: Linux's local journaling and copy-on-write file systems, from Linux 5.8 (before,
// syncfs returned 0 whatever write-back failed). On FUSE (exFAT and NTFS drives), syncfs does
// not reach the daemon's own disk, and network shares differ; there, and on other systems, each
// file is fsynced as before.

/** statfs(2) magic numbers of the file systems whose syncfs is trusted, with their names. */
const TRUSTED_FILE_SYSTEMS = new Map<number, string>([
  [0xef53, 'ext2/3/4'],
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
  [0xf2f52010, 'f2fs'],
]);

/** Whether this kernel's syncfs reports write-back errors (Linux 5.8 on). */
function kernelReportsErrors(release: string): boolean {
  const [major = 0, minor = 0] = release.split('.').map((part) => Number.parseInt(part, 10));
  return major > 5 || (major === 5 && minor >= 8);
}

export class FileSystemFlush {
  /** Whether each folder asked about is on this file system, by its path. */
  private readonly covered = new Map<string, boolean>();

  private constructor(
    private readonly dir: string,
    private readonly device: number,
    private readonly command: string,
  ) {}

  /**
   * A flush for the file system `dir` is on, or undefined where its files must be fsynced one by
   * one. `command` is the sync program to run (found on PATH unless a path is given).
   */
  static forFolder(dir: string, command = 'sync'): FileSystemFlush | undefined {
    if (process.platform !== 'linux' || !kernelReportsErrors(os.release())) return undefined;
    if (!TRUSTED_FILE_SYSTEMS.has(statfsSync(dir).type)) return undefined;
    return new FileSystemFlush(dir, statSync(dir).dev, command);
  }

  /** Whether files in `folder` are made durable by this flush (not on a disk mounted inside). */
  covers(folder: string): boolean {
    let covered = this.covered.get(folder);
    if (covered === undefined) {
      covered = statSync(folder).dev === this.device;
      this.covered.set(folder, covered);
    }
    return covered;
  }

  /**
   * Puts everything written to the file system so far on its disk. Rejects when the sync program
   * cannot be run or reports a failure, with its own words: the caller then fsyncs its files
   * one by one, which tells which of them, if any, did not reach the disk.
   */
  flush(): Promise<void> {
    return new Promise((resolve, reject) => {
      execFile(this.command, ['-f', '--', this.dir], { encoding: 'utf8' }, (error, _, stderr) => {
        if (!error) {
          resolve();
          return;
        }
        const said = stderr.trim() || error.message;
        reject(new Error(`${this.command} -f failed: ${said}`, { cause: error }));
      });
    });
  }
}
