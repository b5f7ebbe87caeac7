import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { statfsSync, statSync } from 'node:fs';
import os from 'node:os';
import type { Readable, Writable } from 'node:stream';

// Makes many restored files durable at once. An fsync of each file costs a journal commit and a
// flush of the disk's cache: on this project's ext4 machine, 10 000 files of 1 KiB took 1.1-1.2 s
// to write fsynced eight at a time, and 0.3 s written unsynced and then flushed once per 1 000
// by syncfs(2), which commits everything the file system holds in one go. Node has no syncfs,
// so `sync -f` calls it (coreutils, and BusyBox's on small systems). A `sync` without -f fails,
// and the files are then fsynced one by one.
//
// It is run by a small shell started once per restore, which runs it each time it reads a line.
// Node starting it itself held the restore up some 10-15 ms a batch, while the kernel copied a
// process of a restore's size (1.5 s of a restore of 100 000 files, whose batch is 1 000): the
// shell is a small process to copy, and copies itself beside the restore.
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

/**
 * Runs `$0 -f -- "$1"` for each line it reads, then tells its exit status on a line of its own;
 * what the program said comes before it. It ends when its input does, as when the restore's
 * process ends, however it ends.
 */
const SYNC_LOOP = 'while read -r _; do "$0" -f -- "$1" 2>&1; echo "canopy-sync-exit $?"; done';
const EXIT_LINE = /^canopy-sync-exit (\d+)$/;

type SyncShell = ChildProcessByStdio<Writable, Readable, null>;

/** What unref() is on: the child, and its pipes (sockets, though typed as plain streams). */
interface Referenced {
  ref(): void;
  unref(): void;
}

/**
 * Whether the shell keeps this process alive: only while a flush waits for it. Idle, it never
 * does, so a restore that ends without closing it still lets its process end, and the shell,
 * its input ended, ends too.
 */
function keepsProcessAlive(shell: SyncShell, alive: boolean): void {
  for (const handle of [shell, shell.stdin, shell.stdout] as unknown as Referenced[])
    if (alive) handle.ref();
    else handle.unref();
}

/** A flush asked of the shell, waiting for its exit line. */
interface AskedFlush {
  resolve(): void;
  reject(error: Error): void;
}

export class FileSystemFlush {
  /** Whether each folder asked about is on this file system, by its path. */
  private readonly covered = new Map<string, boolean>();
  /** The shell that runs the sync program; started by the first flush. */
  private shell: SyncShell | undefined;
  /** Why the shell cannot be used any more, once it cannot: every flush then fails with it. */
  private broken: Error | undefined;
  /** Flushes asked of the shell, in order: each exit line settles the first. */
  private readonly asked: AskedFlush[] = [];
  /** What the sync program said since the last exit line, line by line. */
  private said: string[] = [];
  /** The shell's output not yet ended by a newline. */
  private partial = '';

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
      if (this.broken) {
        reject(this.broken);
        return;
      }
      const shell = this.shell ?? this.startShell();
      this.asked.push({ resolve, reject });
      keepsProcessAlive(shell, true);
      shell.stdin.write('\n');
    });
  }

  /** Ends the shell; a flush still waiting fails. A flush asked after starts another shell. */
  close(): void {
    const closed = new Error(`the flush was closed before ${this.command} -f answered`);
    for (const asked of this.asked.splice(0)) asked.reject(closed);
    this.shell?.stdin.end();
    this.shell = undefined;
  }

  private startShell(): SyncShell {
    const shell = spawn('/bin/sh', ['-c', SYNC_LOOP, this.command, this.dir], {
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    keepsProcessAlive(shell, false);
    // Whatever a shell closed part-way said is not this one's.
    this.said = [];
    this.partial = '';
    shell.stdout.setEncoding('utf8');
    // What a shell closed says or does is no longer of this flush's concern.
    const current = (): boolean => this.shell === shell;
    shell.stdout.on('data', (text: string) => {
      if (current()) this.heard(text);
    });
    const fail = (error: Error): void => {
      if (current()) this.fail(error);
    };
    shell.on('error', fail);
    shell.stdin.on('error', fail);
    shell.on('exit', (code, signal) => {
      if (this.asked.length > 0)
        fail(new Error(`the shell running ${this.command} -f ended (${signal ?? code ?? '?'})`));
    });
    this.shell = shell;
    return shell;
  }

  /** Takes the shell's output: each exit line settles the flush asked first. */
  private heard(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) {
      const exit = EXIT_LINE.exec(line);
      if (!exit) {
        this.said.push(line);
        continue;
      }
      const said = this.said.join('\n').trim();
      this.said = [];
      const asked = this.asked.shift();
      if (this.asked.length === 0 && this.shell) keepsProcessAlive(this.shell, false);
      if (exit[1] === '0') asked?.resolve();
      else
        asked?.reject(
          new Error(`${this.command} -f failed: ${said || `exit status ${exit[1] ?? '?'}`}`),
        );
    }
  }

  /** Fails every flush waiting, and every one asked after, with `error`. */
  private fail(error: Error): void {
    this.broken ??= error;
    for (const asked of this.asked.splice(0)) asked.reject(this.broken);
    this.shell?.kill();
    this.shell = undefined;
  }
}
