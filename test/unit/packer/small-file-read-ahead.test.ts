import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  fsyncSync,
  mkdtempSync,
  openSync,
  rmSync,
  statSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ScannedFile } from '../../../main/packer/pack-source.ts';
import {
  READ_AHEAD_BYTES,
  READ_AHEAD_FILES,
  SlowReads,
  SmallFileReadAhead,
} from '../../../main/packer/small-file-read-ahead.ts';

// Small files are read ahead on a worker only once the packer's own reads wait on the disk; it
// reads only the files still to be read, stays within its bounds, and a named pipe among them
// holds nothing up. That a file was read shows in the page cache: each test file is written to
// the disk and dropped from the cache (dd iflag=nocache), and a read brings it back (fincore,
// of util-linux). Its access time, set two days back, must stay there: a read ahead leaves it
// as the packer's own read does (main/scanner/source-file.ts). It is looked at before fincore,
// whose mmap sets it.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-read-ahead-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function entry(name: string, size: number): ScannedFile {
  return { kind: 'file', path: name, mode: 0o644, mtimeNs: 0n, ctimeNs: 0n, size, ino: 0n };
}

const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000);

/** Runs a command of this machine; its output, or an error naming it. */
function run(command: string, args: string[]): string {
  const done = spawnSync(command, args, { encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`${command} failed: ${done.stderr || done.error}`);
  return done.stdout;
}

/** A file in `dir` on the disk and not in the page cache, last read two days ago. */
function unreadFile(dir: string, name: string, bytes: number): ScannedFile {
  const file = path.join(dir, name);
  const fd = openSync(file, 'w');
  try {
    writeSync(fd, Buffer.alloc(bytes, 7));
    // Dirty pages stay in the cache: only once on the disk can they be dropped from it.
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  utimesSync(file, twoDaysAgo, new Date());
  run('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
  return entry(name, bytes);
}

function wasRead(dir: string, file: ScannedFile): boolean {
  const cached = run('fincore', [
    '--bytes',
    '--noheadings',
    '--output',
    'RES',
    path.join(dir, file.path),
  ]);
  return Number(cached.trim()) > 0;
}

/** Whether the file's access time is still two days back (as set, to within rounding). */
function accessTimeKept(dir: string, file: ScannedFile): boolean {
  return Math.abs(statSync(path.join(dir, file.path)).atimeMs - twoDaysAgo.getTime()) < 1000;
}

/** Waits until `done` holds, for at most five seconds. */
async function until(done: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 5_000; !done();) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('SlowReads', () => {
  const { READ_WINDOW, SLOW_IN_WINDOW, SLOW_MS } = SlowReads;

  it('tells reads that wait on the disk from reads from the cache with a few slow ones', () => {
    const cached = new SlowReads();
    // One read in eight slow, as when another thread takes the core now and then.
    for (let read = 0; read < 10 * READ_WINDOW; read += 1)
      expect(cached.note(read % 8 === 0 ? 20 * SLOW_MS : SLOW_MS / 10)).toBe(false);

    const fromDisk = new SlowReads();
    for (let read = 1; read < SLOW_IN_WINDOW; read += 1)
      expect(fromDisk.note(2 * SLOW_MS)).toBe(false);
    expect(fromDisk.note(2 * SLOW_MS)).toBe(true);
  });

  it('forgets slow reads older than its window', () => {
    const reads = new SlowReads();
    for (let read = 1; read < SLOW_IN_WINDOW; read += 1) reads.note(2 * SLOW_MS);
    for (let read = 0; read < READ_WINDOW; read += 1) expect(reads.note(0)).toBe(false);
    for (let read = 1; read < SLOW_IN_WINDOW; read += 1)
      expect(reads.note(2 * SLOW_MS)).toBe(false);
  });
});

describe('SmallFileReadAhead', () => {
  it('reads nothing until started, then the files walked and to be read, not those known unchanged', async () => {
    const dir = mkdtempSync(path.join(scratch, 'files-'));
    const files = Array.from({ length: 20 }, (_, at) => unreadFile(dir, `f${at}.txt`, 1000 + at));
    const unchanged = new Set(files.filter((_, at) => at % 2 === 1));
    const readAhead = new SmallFileReadAhead(dir, 4096, (file) => !unchanged.has(file));
    try {
      for (const file of files) readAhead.walked(file);
      // The packer takes the first two itself before its reads are seen to wait.
      readAhead.taken(files[0] as ScannedFile);
      readAhead.taken(files[1] as ScannedFile);
      expect(readAhead.started).toBe(false);

      readAhead.start();
      const toRead = files.slice(2).filter((file) => !unchanged.has(file));
      expect(readAhead.filesAhead).toBe(toRead.length);
      await until(() => readAhead.readsEnded === toRead.length);
      expect(files.filter((file) => !accessTimeKept(dir, file))).toEqual([]);
      expect(files.filter((file) => wasRead(dir, file))).toEqual(toRead);
    } finally {
      await readAhead.close();
    }
  });

  it('runs no more files and bytes ahead of the packer than its bounds, and refills as it takes', async () => {
    // Files that are not there: their reads fail, and count all the same.
    const many = Array.from({ length: READ_AHEAD_FILES + 10 }, (_, at) => entry(`gone${at}`, 10));
    const byFiles = new SmallFileReadAhead(scratch, 4096, () => true);
    const large = 200 * 1024;
    const big = Array.from({ length: 200 }, (_, at) => entry(`gone-big${at}`, large));
    const byBytes = new SmallFileReadAhead(scratch, large, () => true);
    try {
      for (const file of many) byFiles.walked(file);
      byFiles.start();
      expect(byFiles.filesAhead).toBe(READ_AHEAD_FILES);
      byFiles.taken(many[0] as ScannedFile);
      expect(byFiles.filesAhead).toBe(READ_AHEAD_FILES);

      for (const file of big) byBytes.walked(file);
      byBytes.start();
      const withinBytes = Math.ceil(READ_AHEAD_BYTES / large);
      expect(byBytes.filesAhead).toBe(withinBytes);
      byBytes.taken(big[0] as ScannedFile);
      byBytes.taken(big[1] as ScannedFile);
      expect(byBytes.filesAhead).toBe(withinBytes);
    } finally {
      await byFiles.close();
      await byBytes.close();
    }
  });

  it('is not held up by named pipes in place of files', async () => {
    const dir = mkdtempSync(path.join(scratch, 'pipe-'));
    const before = unreadFile(dir, 'before.txt', 100);
    // More pipes than the worker reads at once: opens that waited for a writer would hold up
    // every read after them.
    const pipes = Array.from({ length: 8 }, (_, at) => {
      const made = spawnSync('mkfifo', [path.join(dir, `pipe${at}`)]);
      if (made.status !== 0) throw new Error(`mkfifo failed: ${String(made.stderr)}`);
      return entry(`pipe${at}`, 100);
    });
    const after = Array.from({ length: 4 }, (_, at) => unreadFile(dir, `after${at}.txt`, 100));
    const readAhead = new SmallFileReadAhead(dir, 4096, () => true);
    try {
      for (const file of [before, ...pipes, ...after]) readAhead.walked(file);
      readAhead.start();
      await until(() => [before, ...after].every((file) => wasRead(dir, file)));
    } finally {
      await readAhead.close();
    }
  });

  it('refuses a file taken out of walk order', async () => {
    const readAhead = new SmallFileReadAhead(scratch, 4096, () => true);
    readAhead.walked(entry('first', 1));
    readAhead.walked(entry('second', 1));
    expect(() => readAhead.taken(entry('second', 1))).toThrow(
      /second was taken out of its walk order/,
    );
    await readAhead.close();
  });
});
