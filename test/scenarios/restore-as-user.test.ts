import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nobodyEngine, type NobodyEngine } from '../helpers/nobody-engine.ts';
import { mountMemoryDisk, type MountedDisk } from '../helpers/limited-disks.ts';
import type { RestoreResult } from '../../main/restore/index.ts';

// A restore by a user who is not root, into folders whose permissions stand in its way.
//
// A user's own read-only folders (a tree kept with `chmod -R a-w`, Go's module cache), restored
// into again: the restore writes what is missing or differs into them, and leaves each with its
// own mode, whether it succeeds or fails part way. Folders of another user's that this one may
// write into (a team's share) keep their own mode and times, which only their owner may change.
// Run as `nobody`, since root writes anywhere.

const NOBODY = 65534;
const MiB = 1024 * 1024;
const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-read-only-'));
chmodSync(scratch, 0o755);
const home = path.join(scratch, 'home');
const source = path.join(scratch, 'source');
let asNobody: NobodyEngine;
let disk: MountedDisk | undefined;

/** A file's or folder's permission bits. */
const modeOf = (file: string): number => lstatSync(file).mode & 0o7777;

/** Makes `dir` (and what is above it below scratch) as nobody's, with `mode`. */
function nobodysFolder(dir: string, mode: number): void {
  mkdirSync(dir, { recursive: true });
  chownSync(dir, NOBODY, NOBODY);
  chmodSync(dir, mode);
}

/** Writes `file` as nobody's, in a folder opened for the while and given `folderMode` back. */
function writeInto(file: string, content: string | Buffer, folderMode = 0o555): void {
  chmodSync(path.dirname(file), 0o755);
  writeFileSync(file, content);
  chownSync(file, NOBODY, NOBODY);
  chmodSync(path.dirname(file), folderMode);
}

/** Runs a restore as nobody; its result, once it succeeded. */
function restored(target: string, ...options: string[]): RestoreResult {
  const run = asNobody(['restore', 'Kept', target, ...options]);
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return JSON.parse(run.stdout) as RestoreResult;
}

beforeAll(() => {
  asNobody = nobodyEngine(home);
  expect(asNobody(['login', 'Kept']).stderr).toBe('');
  nobodysFolder(path.join(source, 'archive', 'deeper'), 0o755);
  nobodysFolder(source, 0o755);
  nobodysFolder(path.join(source, 'archive'), 0o755);
  for (const [name, content] of [
    ['top.txt', 'top'],
    ['archive/a.txt', 'kept a'],
    ['archive/deeper/b.txt', 'kept b'],
  ] as const) {
    writeFileSync(path.join(source, name), content);
    chownSync(path.join(source, name), NOBODY, NOBODY);
  }
  chmodSync(path.join(source, 'archive', 'deeper'), 0o555);
  chmodSync(path.join(source, 'archive'), 0o555);
  const backup = asNobody(['backup', source, 'Kept']);
  expect(backup.stderr).toBe('');
  expect(backup.status).toBe(0);
}, 60_000);

afterAll(() => {
  disk?.unmount();
  rmSync(scratch, { recursive: true, force: true });
});

describe("a restore into the user's own read-only folders", () => {
  it('puts the backed-up copy of a changed file beside it, or over it when asked, and leaves the folders read-only', () => {
    const target = path.join(home, 'restored');
    restored(target);
    const deeper = path.join(target, 'archive', 'deeper');
    expect([modeOf(path.join(target, 'archive')), modeOf(deeper)]).toEqual([0o555, 0o555]);

    // The file itself stays writable: the user edits it where it is.
    writeFileSync(path.join(deeper, 'b.txt'), 'edited b');
    expect(restored(target).renamed).toEqual(['archive/deeper/b (restored).txt']);
    expect(readFileSync(path.join(deeper, 'b.txt'), 'utf8')).toBe('edited b');
    expect(readFileSync(path.join(deeper, 'b (restored).txt'), 'utf8')).toBe('kept b');
    expect([modeOf(path.join(target, 'archive')), modeOf(deeper)]).toEqual([0o555, 0o555]);

    writeFileSync(path.join(deeper, 'b.txt'), 'edited again');
    const overwritten = restored(target, '--overwrite');
    expect(overwritten.renamed).toEqual([]);
    expect(readFileSync(path.join(deeper, 'b.txt'), 'utf8')).toBe('kept b');
    expect(readdirSync(deeper).sort()).toEqual(['b (restored).txt', 'b.txt']);
    expect([modeOf(path.join(target, 'archive')), modeOf(deeper)]).toEqual([0o555, 0o555]);
  });

  it('restores into a read-only target, and into a read-only folder a new target is made in, and gives each its mode back', () => {
    const target = path.join(home, 'read-only-target');
    nobodysFolder(target, 0o555);
    const plan = asNobody(['plan-restore', 'Kept', target]);
    expect(plan.stderr).toBe('');
    expect(JSON.parse(plan.stdout)).toMatchObject({ files: 3, refusedBecause: null });
    expect(restored(target).files).toBe(3);
    expect(readFileSync(path.join(target, 'archive', 'a.txt'), 'utf8')).toBe('kept a');
    expect(modeOf(target)).toBe(0o555);

    const parent = path.join(home, 'read-only-parent');
    nobodysFolder(parent, 0o500);
    expect(restored(path.join(parent, 'new')).files).toBe(3);
    expect(readFileSync(path.join(parent, 'new', 'top.txt'), 'utf8')).toBe('top');
    expect(modeOf(parent)).toBe(0o500);
  });

  it('leaves the folders a killed restore opened to the next restore, which gives their modes back', () => {
    const target = path.join(home, 'killed');
    restored(target);
    const archive = path.join(target, 'archive');
    const deeper = path.join(archive, 'deeper');
    writeFileSync(path.join(archive, 'a.txt'), 'edited a');
    writeFileSync(path.join(deeper, 'b.txt'), 'edited b');
    const killed = asNobody(['crash-restore', 'Kept', target, '1']);
    expect(killed.signal).toBe('SIGKILL');
    // Opened as the kill left them: what this test is about.
    expect([archive, deeper].map(modeOf)).toContain(0o755);

    // Any later restore, into another folder even.
    restored(path.join(home, 'elsewhere'));
    expect([modeOf(archive), modeOf(deeper)]).toEqual([0o555, 0o555]);
    const names = readdirSync(target, { recursive: true, encoding: 'utf8' });
    expect(names.filter((name) => name.includes('.canopy-restore-'))).toEqual([]);
    expect(readFileSync(path.join(deeper, 'b.txt'), 'utf8')).toBe('edited b');
  });

  it('gives the folders their modes back when the restore fails part way, and tells one too large up front', () => {
    // A small disk of nobody's, holding the first version already: a restore of the next, with
    // a file the disk cannot hold, is not refused up front (the names it writes are taken).
    disk = mountMemoryDisk(path.join(scratch, 'small-disk'), 'tmpfs', 2);
    chownSync(disk.dir, NOBODY, NOBODY);
    const target = path.join(disk.dir, 'restored');
    restored(target);
    writeInto(path.join(source, 'archive', 'deeper', 'large.bin'), randomBytes(4 * MiB));
    const backup = asNobody(['backup', source, 'Kept']);
    expect(backup.stderr).toBe('');

    const failed = asNobody(['restore', 'Kept', target]);
    expect(failed.stderr).toMatch(/^disk_full: not enough free space in /);
    expect(failed.status).toBe(1);
    const deeper = path.join(target, 'archive', 'deeper');
    expect([modeOf(path.join(target, 'archive')), modeOf(deeper)]).toEqual([0o555, 0o555]);
    expect(readdirSync(deeper)).toEqual(['b.txt']);
    expect(readFileSync(path.join(deeper, 'b.txt'), 'utf8')).toBe('kept b');

    // Into a read-only folder of its own on that disk, too large: told before anything is
    // written, as into any other.
    const closed = path.join(disk.dir, 'closed');
    nobodysFolder(closed, 0o555);
    const refused = asNobody(['restore', 'Kept', closed]);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^disk_full: not enough free space in ${closed} to restore: .*; nothing was restored`,
      ),
    );
    expect(readdirSync(closed)).toEqual([]);
    expect(modeOf(closed)).toBe(0o555);
  });
});

describe("a restore --overwrite into another user's folders open to this one", () => {
  it('restores the files, and leaves the folders their own mode, saying so', () => {
    // Root's share, open to all, as a team's shared folder is to its members.
    const share = path.join(scratch, 'share');
    const archive = path.join(share, 'archive');
    const deeper = path.join(archive, 'deeper');
    mkdirSync(deeper, { recursive: true });
    for (const dir of [share, archive, deeper]) chmodSync(dir, 0o777);
    writeFileSync(path.join(archive, 'a.txt'), 'a colleague changed a');
    chmodSync(path.join(archive, 'a.txt'), 0o666);

    const result = restored(share, '--overwrite');
    expect(result).toMatchObject({ foldersOfOthers: 2, directories: 0, modesNotKept: 0 });
    expect(readFileSync(path.join(archive, 'a.txt'), 'utf8')).toBe('kept a');
    expect(readFileSync(path.join(deeper, 'b.txt'), 'utf8')).toBe('kept b');
    expect([modeOf(archive), modeOf(deeper)]).toEqual([0o777, 0o777]);
  });
});

describe('a restore --overwrite into a sticky folder, as /tmp, holding what another user has there', () => {
  it('replaces its own, restores beside what is theirs, and says which', () => {
    const share = path.join(scratch, 'sticky');
    const archive = path.join(share, 'archive');
    mkdirSync(archive, { recursive: true });
    for (const dir of [share, archive]) chmodSync(dir, 0o1777);
    // Root's: a file of a restored file's name, and one of a restored folder's name.
    writeFileSync(path.join(archive, 'a.txt'), "root's a");
    writeFileSync(path.join(archive, 'deeper'), "root's file");
    for (const file of ['a.txt', 'deeper']) chmodSync(path.join(archive, file), 0o666);
    // Nobody's own, which it may replace.
    writeFileSync(path.join(share, 'top.txt'), 'an older top');
    chownSync(path.join(share, 'top.txt'), NOBODY, NOBODY);

    const plan = asNobody(['plan-restore', 'Kept', share, '--overwrite']);
    expect(plan.stderr).toBe('');
    expect(JSON.parse(plan.stdout)).toMatchObject({
      replaced: ['top.txt'],
      beside: ['archive/a.txt', 'archive/deeper'],
    });
    const result = restored(share, '--overwrite');
    expect([...result.renamed].sort()).toEqual([
      'archive/a (restored).txt',
      'archive/deeper (restored)',
    ]);
    expect([...result.notReplaced].sort((a, b) => a.path.localeCompare(b.path))).toEqual(
      ['archive/a.txt', 'archive/deeper'].map((kept) => ({
        path: kept,
        reason: "another user's, in a shared folder where only they may replace it",
      })),
    );
    expect(readFileSync(path.join(share, 'top.txt'), 'utf8')).toBe('top');
    expect(readFileSync(path.join(archive, 'a.txt'), 'utf8')).toBe("root's a");
    expect(readFileSync(path.join(archive, 'a (restored).txt'), 'utf8')).toBe('kept a');
    expect(readFileSync(path.join(archive, 'deeper (restored)', 'b.txt'), 'utf8')).toBe('kept b');
  });
});

describe('a backup after a restore into the folder backed up was killed', () => {
  it('gives the read-only folders the restore opened their modes back, and records those', () => {
    // Last in this file: it changes the folder backed up.
    const deeper = path.join(source, 'archive', 'deeper');
    writeInto(path.join(deeper, 'b.txt'), 'changed b');
    // Back where it was backed up from, beside the changed file, killed after its first file.
    const killed = asNobody(['crash-restore', 'Kept', source, '1']);
    expect(killed.signal).toBe('SIGKILL');
    expect(modeOf(deeper)).toBe(0o755);

    const backup = asNobody(['backup', source, 'Kept']);
    expect(backup.stderr).toBe('');
    expect(modeOf(deeper)).toBe(0o555);
    const back = path.join(home, 'after-backup');
    restored(back);
    expect(modeOf(path.join(back, 'archive', 'deeper'))).toBe(0o555);
    expect(readFileSync(path.join(back, 'archive', 'deeper', 'b.txt'), 'utf8')).toBe('changed b');
  });
});
