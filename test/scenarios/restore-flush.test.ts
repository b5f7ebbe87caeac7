import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSystemFlush } from '../../main/restore/file-system-flush.ts';
import { loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { mountExt4, mountMemoryDisk, type MountedDisk } from '../helpers/limited-disks.ts';

// A restore onto ext4 makes its files durable a batch at a time, with one flush of the file
// system (syncfs through `sync -f`) instead of an fsync per file. Here, on ext4 disks
// of their own, with the real CLI: the batches are flushed, a flush that fails leaves every file
// fsynced by itself and restored all the same, and a disk that fills up part-way keeps the files
// written whole before it did. The `sync` the restore runs is found on PATH, so a test can put a
// program in front of it that logs its calls, or fails as a disk's I/O error would.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restore-flush-'));
chmodSync(scratch, 0o755);
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const fileStore = { CANOPY_SECRET_STORE: 'file' };
/** More small files than one flush takes (1 000), and a large file among them. */
const docs = Array.from({ length: 2500 }, () => randomBytes(1024));
const large = randomBytes(3 * 1024 * 1024 + 5);
const first = Array.from({ length: 30 }, () => randomBytes(2000));
let disk: MountedDisk;
let smallDisk: MountedDisk;
const mounts: MountedDisk[] = [];

/** A `sync` program that logs its arguments to `log`, then runs the real one or fails. */
function loggingSync(name: string, log: string, fails: boolean): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir);
  const then = fails
    ? `echo "sync: error syncing '$3': Input/output error" >&2; exit 1`
    : 'exec /bin/sync "$@"';
  writeFileSync(path.join(dir, 'sync'), `#!/bin/sh\necho "$@" >> '${log}'\n${then}\n`, {
    mode: 0o755,
  });
  return path.join(dir, 'sync');
}

/** Whether a process of this id runs. */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** PATH with `sync` found first. */
function pathWith(sync: string): string {
  return `${path.dirname(sync)}:${process.env['PATH'] ?? ''}`;
}

/** The docs folder restored whole into `target`, and nothing under a temporary name. */
function expectDocsRestored(target: string): void {
  const restored = path.join(target, 'docs');
  for (const [i, bytes] of docs.entries())
    expect(readFileSync(path.join(restored, `d${i % 25}`, `note-${i}.txt`)).equals(bytes)).toBe(
      true,
    );
  expect(readFileSync(path.join(restored, 'large.bin')).equals(large)).toBe(true);
  const names = readdirSync(target, { recursive: true }).map(String);
  expect(names.filter((name) => name.includes('.canopy-'))).toEqual([]);
}

/**
 * Restores the docs folder into `target` with a `sync` in front that fails or not, checks that
 * it is all there, and returns the calls to `sync`.
 */
async function restoreDocs(target: string, syncFails: boolean): Promise<string[]> {
  const log = `${target}.sync.log`;
  const sync = loggingSync(`sync-for-${path.basename(target)}`, log, syncFails);
  const restore = await runCanopy(home, ['restore', '--bucket', 'Docs', 'docs', '--to', target], {
    ...fileStore,
    PATH: pathWith(sync),
  });
  expect(restore.status, restore.stderr).toBe(0);
  expect(restore.stderr).toBe('');
  expectDocsRestored(target);
  return readFileSync(log, 'utf8').trim().split('\n');
}

beforeAll(async () => {
  for (const [i, bytes] of docs.entries()) {
    const dir = path.join(source, 'docs', `d${i % 25}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `note-${i}.txt`), bytes);
  }
  writeFileSync(path.join(source, 'docs', 'large.bin'), large);
  // For the full disk: small files that fit, a large one that does not, small ones after it.
  mkdirSync(path.join(source, 'a-first'));
  for (const [i, bytes] of first.entries())
    writeFileSync(path.join(source, 'a-first', `note-${i}.txt`), bytes);
  writeFileSync(path.join(source, 'a-large.bin'), randomBytes(40 << 20));
  await loginWithBucket(home, path.join(scratch, 'local'), 'Docs');
  const backup = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], fileStore);
  expect(backup.status, backup.stderr).toBe(0);
  disk = mountExt4(path.join(scratch, 'ext4'), 64);
  mounts.push(disk);
  smallDisk = mountExt4(path.join(scratch, 'small-ext4'), 16);
  mounts.push(smallDisk);
}, 60_000);

afterAll(() => {
  for (const mount of mounts.reverse()) mount.unmount();
  rmSync(scratch, { recursive: true, force: true });
});

describe('flushing a restore onto ext4', () => {
  it('flushes ext4 whole, but not a memory disk, nor a disk mounted inside', async () => {
    const flush = FileSystemFlush.forFolder(disk.dir);
    expect(flush).toBeDefined();
    mkdirSync(path.join(disk.dir, 'plain'));
    expect(flush?.covers(path.join(disk.dir, 'plain'))).toBe(true);
    const inside = mountMemoryDisk(path.join(disk.dir, 'inside'), 'tmpfs', 1);
    mounts.push(inside);
    expect(flush?.covers(inside.dir)).toBe(false);
    expect(FileSystemFlush.forFolder(inside.dir)).toBeUndefined();
    await expect(flush?.flush()).resolves.toBeUndefined();
  });

  it('says why a flush failed: the sync program in its own words, or that it cannot run', async () => {
    const log = path.join(scratch, 'words.log');
    const failing = FileSystemFlush.forFolder(disk.dir, loggingSync('words', log, true));
    await expect(failing?.flush()).rejects.toThrow(
      `sync: error syncing '${disk.dir}': Input/output error`,
    );
    failing?.close();
    const missing = path.join(scratch, 'no-such-sync');
    const unrunnable = FileSystemFlush.forFolder(disk.dir, missing);
    await expect(unrunnable?.flush()).rejects.toThrow(`${missing} -f failed: `);
    unrunnable?.close();
  });

  it('runs the sync program for every flush from one shell, which ends when closed', async () => {
    const log = path.join(scratch, 'parents.log');
    const dir = path.join(scratch, 'parents');
    mkdirSync(dir);
    const sync = path.join(dir, 'sync');
    writeFileSync(sync, `#!/bin/sh\necho "$PPID $*" >> '${log}'\nexec /bin/sync "$@"\n`, {
      mode: 0o755,
    });
    const flush = FileSystemFlush.forFolder(disk.dir, sync);
    if (!flush) throw new Error('ext4 is flushed whole');
    for (let i = 0; i < 3; i += 1) await flush.flush();
    const calls = readFileSync(log, 'utf8').trim().split('\n');
    expect(calls).toHaveLength(3);
    expect(new Set(calls).size).toBe(1);
    const [shell = '', args] = (calls[0] ?? '').split(/ (.*)/);
    expect(args).toBe(`-f -- ${disk.dir}`);
    flush.close();
    await expect.poll(() => isRunning(Number(shell))).toBe(false);
    // Asked again, it starts another.
    await flush.flush();
    expect(readFileSync(log, 'utf8').trim().split('\n')).toHaveLength(4);
    flush.close();
  });

  it('fails a flush still waiting when it is closed', async () => {
    const dir = path.join(scratch, 'slow');
    mkdirSync(dir);
    const sync = path.join(dir, 'sync');
    writeFileSync(sync, '#!/bin/sh\nsleep 1\nexec /bin/sync "$@"\n', { mode: 0o755 });
    const flush = FileSystemFlush.forFolder(disk.dir, sync);
    const waiting = flush?.flush();
    flush?.close();
    await expect(waiting).rejects.toThrow(`the flush was closed before ${sync} -f answered`);
  });

  it('restores thousands of files with a flush per batch rather than an fsync per file', async () => {
    const target = path.join(disk.dir, 'flushed');
    const flushes = await restoreDocs(target, false);
    // 2 501 files: two full batches and the rest at the end, each flushing the target's disk.
    expect(flushes.length).toBeGreaterThanOrEqual(3);
    expect(flushes.length).toBeLessThan(10);
    for (const args of flushes) expect(args).toBe(`-f -- ${target}`);
  });

  it('fsyncs each file when a flush fails, and restores every one', async () => {
    const flushes = await restoreDocs(path.join(disk.dir, 'fsynced'), true);
    // Tried once: after it failed, every file was fsynced by itself.
    expect(flushes).toHaveLength(1);
  });

  it('refuses a restore too large for a fresh ext4 disk; run once a part of it is there, tells the disk filling and keeps whole the files it wrote', async () => {
    // The disk holds only its lost+found: nothing of the version could be there already.
    const refused = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--to', smallDisk.dir],
      fileStore,
    );
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(
      /^canopy: not enough free space in \S+ to restore: its files hold 48 MB, and the disk has 1\d(\.\d)? MB free; nothing was restored\./,
    );
    expect(readdirSync(smallDisk.dir)).toEqual(['lost+found']);
    // Once a part of it is there (a restore of it stopped, say), it is tried, and the disk
    // fills part way.
    const part = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', 'a-first', '--to', smallDisk.dir],
      fileStore,
    );
    expect(part.status, part.stderr).toBe(0);
    const full = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--to', smallDisk.dir],
      fileStore,
    );
    expect(full.status).toBe(1);
    expect(full.stderr).toBe(
      `canopy: not enough free space in ${smallDisk.dir} to restore; free some space and run it again\n`,
    );
    const names = readdirSync(smallDisk.dir, { recursive: true }).map(String);
    expect(names.filter((name) => name.includes('.canopy-'))).toEqual([]);
    expect(names).not.toContain('a-large.bin');
    for (const [i, bytes] of first.entries())
      expect(readFileSync(path.join(smallDisk.dir, 'a-first', `note-${i}.txt`)).equals(bytes)).toBe(
        true,
      );
  });
});
