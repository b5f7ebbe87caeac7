import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { accessTimesOf } from '../helpers/access-times.ts';
import { fingerprintTree } from '../helpers/tree-fingerprint.ts';
import {
  createEngine,
  type BackupProgress,
  type Engine,
  type VerifyProgress,
} from '../../main/index.ts';
import { cidText, rawCidOf } from '../../main/protocol/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { writeSparseFile } from '../helpers/sparse-file.ts';
import { damageStoredBlock, storedCarBytes } from '../helpers/stored-blocks.ts';

// Backup and restore through the engine and the embedded local service: a generated tree
// round-trips byte for byte with modes, mtimes and symlinks, and a second backup sends only
// what changed.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-backup-'));
const source = path.join(scratch, 'source');
let engine: Engine;

beforeAll(async () => {
  const MiB = 1 << 20;
  mkdirSync(path.join(source, 'a', 'b', 'c', 'd', 'e'), { recursive: true });
  writeFileSync(path.join(source, 'empty'), '');
  writeFileSync(path.join(source, 'exactly-1MiB'), randomBytes(MiB));
  writeFileSync(path.join(source, '1MiB-minus-1'), randomBytes(MiB - 1));
  writeFileSync(path.join(source, '1MiB-plus-1'), randomBytes(MiB + 1));
  writeFileSync(path.join(source, 'a', 'b', 'c', 'd', 'e', 'five-MiB.bin'), randomBytes(5 * MiB));
  writeFileSync(path.join(source, 'a', 'fifty-MiB.bin'), randomBytes(50 * MiB));
  writeFileSync(path.join(source, 'caf\u00e9 NFC'), 'nfc');
  writeFileSync(path.join(source, 'cafe\u0301 NFD'), 'nfd');
  writeFileSync(path.join(source, 'line\nbreak'), 'newline in the name');
  writeFileSync(path.join(source, 'run.sh'), '#!/bin/sh\necho hi\n');
  chmodSync(path.join(source, 'run.sh'), 0o755);
  writeFileSync(path.join(source, 'old.txt'), 'from 1999');
  utimesSync(
    path.join(source, 'old.txt'),
    new Date('1999-12-31T23:59:59Z'),
    new Date('1999-12-31T23:59:59Z'),
  );
  symlinkSync('a/b/c/d/e/five-MiB.bin', path.join(source, 'shortcut'));
  symlinkSync('loop', path.join(source, 'loop'));
  // Files written the instant before a backup are read again by the next one (their mtime
  // could still change within the same tick); these were written a minute "ago".
  const aMinuteAgo = new Date(Date.now() - 60_000);
  for (const [rel, print] of fingerprintTree(source))
    if (print.type === 'file' && rel !== 'old.txt')
      utimesSync(path.join(source, rel), aMinuteAgo, aMinuteAgo);
  const home = path.join(scratch, 'home');
  engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  await engine.loginLocal({});
  await engine.createBucket({ name: 'Everything', type: 'backup', storageClass: 'hot' });
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('backup and restore', () => {
  it('round-trips a generated tree byte for byte, with modes, mtimes and symlinks, and leaves the access times it read', async () => {
    // Each file's access time is no later than its mtime: the next plain read would set it to
    // now (relatime), and a mail reader would take an mbox for read.
    const accessTimes = accessTimesOf(source);
    const first = await engine.backup({ dir: source, bucket: 'Everything' });
    expect(accessTimesOf(source)).toEqual(accessTimes);
    expect(first.files).toBe(11);
    expect(first.newBytes).toBe(first.bytesScanned);
    expect(first.skipped).toEqual([]);
    const target = path.join(scratch, 'restored');
    const restored = await engine.restore({ bucket: 'Everything', to: target, overwrite: false });
    expect(restored.files).toBe(11);
    expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
  });

  it('neither reads nor sends an unchanged tree, and reads and sends only what an edit changed', async () => {
    const [before] = await engine.listVersions({ bucket: 'Everything' });
    const unchanged = await engine.backup({ dir: source, bucket: 'Everything' });
    expect(unchanged).toMatchObject({
      unchanged: true,
      versionId: before?.id,
      newBytes: 0,
      bytesUploaded: 0,
      bytesRead: 0,
      filesUnchanged: 11,
      metadataBytesUploaded: 0,
    });
    const file = path.join(source, '1MiB-plus-1');
    const bytes = readFileSync(file);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0xff;
    writeFileSync(file, bytes);
    const edited = await engine.backup({ dir: source, bucket: 'Everything' });
    expect(edited).toMatchObject({ newBytes: 1, bytesRead: bytes.length, filesUnchanged: 10 });
    // The new version's metadata CAR, its whole tree, went up with it, and is told.
    expect(edited.metadataBytesUploaded).toBe(
      storedCarBytes(path.join(scratch, 'home', 'local-server'), edited.versionId),
    );
    const versions = await engine.listVersions({ bucket: 'Everything' });
    // The unchanged run made no version.
    expect(versions.map((version) => version.state)).toEqual(['active', 'outdated']);
  });

  it('reports progress in files and bytes, scanning, then reading and uploading with an ETA', async () => {
    await engine.createBucket({ name: 'Progress', type: 'backup', storageClass: 'hot' });
    const seen: BackupProgress[] = [];
    const result = await engine.backup({
      dir: source,
      bucket: 'Progress',
      onProgress: (progress) => seen.push(progress),
    });
    const scanning = seen.filter((progress) => progress.phase === 'scanning');
    const reading = seen.filter((progress) => progress.phase === 'reading');
    const pushing = seen.filter((progress) => progress.phase === 'pushing');
    const uploading = seen.filter((progress) => progress.phase === 'uploading');
    expect(seen).toEqual([...scanning, ...reading, ...pushing, ...uploading]);
    // The scan counts what it finds, with no ETA: its total is known only at its end.
    expect(scanning.at(-1)).toEqual({
      phase: 'scanning',
      filesDone: 11,
      filesTotal: 11,
      bytesDone: result.bytesScanned,
      bytesTotal: result.bytesScanned,
      etaSeconds: null,
    });
    expect(reading.at(-1)).toMatchObject({
      filesDone: 11,
      filesTotal: 11,
      bytesDone: result.bytesScanned,
      bytesTotal: result.bytesScanned,
      etaSeconds: 0,
    });
    // The version's tree goes before its data, every file read by then.
    expect(result.metadataBytesUploaded).toBeGreaterThan(0);
    expect(pushing.at(-1)).toEqual({
      phase: 'pushing',
      filesDone: 11,
      filesTotal: 11,
      bytesDone: result.metadataBytesUploaded,
      bytesTotal: result.metadataBytesUploaded,
      etaSeconds: 0,
    });
    expect(uploading.at(-1)).toMatchObject({
      bytesDone: result.bytesUploaded,
      bytesTotal: result.bytesUploaded,
    });
    for (const phase of [scanning, reading, pushing, uploading]) {
      for (const [index, progress] of phase.entries()) {
        expect(progress.bytesDone).toBeGreaterThanOrEqual(phase[index - 1]?.bytesDone ?? 0);
        expect(progress.etaSeconds === null || progress.etaSeconds >= 0).toBe(true);
      }
    }
  });

  it('counts only the files it must read again in the reading total of a later backup', async () => {
    const tree = path.join(scratch, 'progress-again');
    mkdirSync(path.join(tree, 'sub'), { recursive: true });
    const aMinuteAgo = new Date(Date.now() - 60_000);
    for (const [name, size] of [
      ['kept.bin', 300_000],
      ['sub/kept.txt', 2_000],
      ['edited.bin', 200_000],
    ] as const) {
      writeFileSync(path.join(tree, name), randomBytes(size));
      utimesSync(path.join(tree, name), aMinuteAgo, aMinuteAgo);
    }
    await engine.createBucket({ name: 'Progress again', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: tree, bucket: 'Progress again' });
    writeFileSync(path.join(tree, 'edited.bin'), randomBytes(123_456));
    const seen: BackupProgress[] = [];
    const result = await engine.backup({
      dir: tree,
      bucket: 'Progress again',
      onProgress: (progress) => seen.push(progress),
    });
    expect(result).toMatchObject({ filesUnchanged: 2, bytesRead: 123_456 });
    const reading = seen.filter((progress) => progress.phase === 'reading');
    expect(reading[0]).toMatchObject({ filesTotal: 3, bytesTotal: 123_456 });
    expect(reading.at(-1)).toMatchObject({ filesDone: 3, bytesDone: 123_456, etaSeconds: 0 });
  });

  it('never renames two restored files onto one name', async () => {
    const names = path.join(scratch, 'names');
    mkdirSync(names);
    writeFileSync(path.join(names, 'a.txt'), 'backed-up a');
    writeFileSync(path.join(names, 'a (restored).txt'), 'backed-up a (restored)');
    await engine.createBucket({ name: 'Names', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: names, bucket: 'Names' });
    const target = path.join(scratch, 'names-target');
    mkdirSync(target);
    writeFileSync(path.join(target, 'a.txt'), 'mine');
    const restored = await engine.restore({ bucket: 'Names', to: target, overwrite: false });
    // The version's own "a (restored).txt" keeps its name: the copy of a.txt takes the next.
    expect(restored.renamed).toEqual(['a (restored 2).txt']);
    expect(readFileSync(path.join(target, 'a.txt'), 'utf8')).toBe('mine');
    expect(readFileSync(path.join(target, 'a (restored 2).txt'), 'utf8')).toBe('backed-up a');
    expect(readFileSync(path.join(target, 'a (restored).txt'), 'utf8')).toBe(
      'backed-up a (restored)',
    );
  });

  it('restores content stored many times over: side by side, within one file, a folder apart, hard links', async () => {
    const MiB = 1 << 20;
    const tree = path.join(scratch, 'repeats');
    const note = randomBytes(3000);
    mkdirSync(path.join(tree, 'notes'), { recursive: true });
    for (let i = 0; i < 20; i += 1) writeFileSync(path.join(tree, 'notes', `copy-${i}.txt`), note);
    // Two names of one file: UnixFS has no hard links, so each comes back as a file of its own.
    writeFileSync(path.join(tree, 'notes', 'linked.txt'), 'one file, two names');
    linkSync(path.join(tree, 'notes', 'linked.txt'), path.join(tree, 'also-linked.txt'));
    const chunk = randomBytes(MiB);
    writeFileSync(path.join(tree, 'same-chunk-thrice.bin'), Buffer.concat([chunk, chunk, chunk]));
    // More than a fetch batch (8 MiB) lies between a file in first/ and its copy in second/.
    for (const folder of ['first', 'second']) mkdirSync(path.join(tree, folder));
    for (let i = 0; i < 12; i += 1) {
      const bytes = randomBytes(MiB + i);
      for (const folder of ['first', 'second'])
        writeFileSync(path.join(tree, folder, `part-${i}.bin`), bytes);
    }
    await engine.createBucket({ name: 'Repeats', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: tree, bucket: 'Repeats' });
    const everything = path.join(scratch, 'repeats-restored');
    await engine.restore({ bucket: 'Repeats', to: everything, overwrite: false });
    expect(fingerprintTree(everything)).toEqual(fingerprintTree(tree));
    const [linked, alsoLinked] = [path.join('notes', 'linked.txt'), 'also-linked.txt'].map((name) =>
      lstatSync(path.join(everything, name)),
    );
    expect([linked?.nlink, alsoLinked?.nlink]).toEqual([1, 1]);
    expect(linked?.ino).not.toBe(alsoLinked?.ino);
    const secondOnly = path.join(scratch, 'repeats-second');
    await engine.restore({ bucket: 'Repeats', path: 'second', to: secondOnly, overwrite: false });
    expect(fingerprintTree(path.join(secondOnly, 'second'))).toEqual(
      fingerprintTree(path.join(tree, 'second')),
    );
  });

  it('restores a file whose name is as long as the file system allows', async () => {
    const tree = path.join(scratch, 'long-names');
    mkdirSync(tree);
    // 255 bytes, the most ext4 and most other file systems take: the restore's temporary
    // name for it must fit as well.
    const name = `${'\u00e9'.repeat(123)}-long.txt`;
    expect(Buffer.byteLength(name)).toBe(255);
    writeFileSync(path.join(tree, name), 'a name of 255 bytes');
    await engine.createBucket({ name: 'Long', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: tree, bucket: 'Long' });
    const target = path.join(scratch, 'long-restored');
    await engine.restore({ bucket: 'Long', to: target, overwrite: false });
    expect(readdirSync(target)).toEqual([name]);
    expect(readFileSync(path.join(target, name), 'utf8')).toBe('a name of 255 bytes');
  });

  it('leaves whole chunks of zeros as holes when asked, byte for byte, at the size the data takes', async () => {
    const tree = path.join(scratch, 'sparse');
    mkdirSync(tree);
    // A disk image: 16 MiB, of which 300 KiB at 5 MiB hold data, and a file ending part-way
    // through a chunk of zeros.
    writeSparseFile(path.join(tree, 'disk.img'), 16 << 20, randomBytes(300 << 10), 5 << 20);
    writeSparseFile(path.join(tree, 'odd.img'), (3 << 20) + 1234, new Uint8Array(0), 0);
    await engine.createBucket({ name: 'Sparse', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: tree, bucket: 'Sparse' });
    const target = path.join(scratch, 'sparse-restored');
    const result = await engine.restore({
      bucket: 'Sparse',
      to: target,
      overwrite: false,
      sparse: true,
    });
    expect(result).toMatchObject({ files: 2, bytes: (16 << 20) + (3 << 20) + 1234 });
    for (const name of ['disk.img', 'odd.img'])
      expect(
        readFileSync(path.join(target, name)).equals(readFileSync(path.join(tree, name))),
      ).toBe(true);
    // The image's one chunk with data, and the odd file's last, short chunk: the rest are holes.
    const allocated = (name: string): number => statSync(path.join(target, name)).blocks * 512;
    expect(allocated('disk.img')).toBeLessThanOrEqual((1 << 20) + 64 * 1024);
    expect(allocated('odd.img')).toBeLessThanOrEqual(64 * 1024);
    // Without asking, every byte is written, as cp does by default.
    const dense = path.join(scratch, 'sparse-dense');
    await engine.restore({ bucket: 'Sparse', to: dense, overwrite: false });
    expect(statSync(path.join(dense, 'disk.img')).blocks * 512).toBeGreaterThanOrEqual(16 << 20);
  });

  it('never overwrites unless asked, and restores one folder', async () => {
    const target = path.join(scratch, 'conflict');
    mkdirSync(target);
    writeFileSync(path.join(target, 'old.txt'), 'mine, not the backup');
    const kept = await engine.restore({
      bucket: 'Everything',
      path: 'old.txt',
      to: target,
      overwrite: false,
    });
    expect(kept.renamed).toEqual(['old (restored).txt']);
    expect(readFileSync(path.join(target, 'old.txt'), 'utf8')).toBe('mine, not the backup');
    expect(readFileSync(path.join(target, 'old (restored).txt'), 'utf8')).toBe('from 1999');
    await engine.restore({ bucket: 'Everything', path: 'old.txt', to: target, overwrite: true });
    expect(readFileSync(path.join(target, 'old.txt'), 'utf8')).toBe('from 1999');
    const folder = path.join(scratch, 'folder');
    await engine.restore({ bucket: 'Everything', path: 'a/b', to: folder, overwrite: false });
    expect(readdirSync(folder)).toEqual(['b']);
    expect(lstatSync(path.join(folder, 'b', 'c', 'd', 'e', 'five-MiB.bin')).size).toBe(5 << 20);
    await expect(
      engine.restore({ bucket: 'Everything', path: 'nope', to: folder, overwrite: false }),
    ).rejects.toThrow(
      'no nope in this version (canopy ls without a path shows what is there, canopy history the versions that hold it)',
    );
    // A name mistyped near the start: the folder to look in is the deepest one the version holds.
    await expect(
      engine.restore({ bucket: 'Everything', path: 'a/bb/c/d', to: folder, overwrite: false }),
    ).rejects.toThrow('no a/bb/c/d in this version (canopy ls "a" shows what is there,');
    expect(readdirSync(folder)).toEqual(['b']);
  });
});

describe("Canopy's own folders", () => {
  it('never backs up its home or the local service data, even inside the folder backed up', async () => {
    // A user backs up their whole home folder, where Canopy keeps its state and backups.
    const userHome = path.join(scratch, 'user-home');
    const canopyHome = path.join(userHome, '.local', 'share', 'canopy', 'client');
    const serviceData = path.join(userHome, '.local', 'share', 'canopy', 'server');
    mkdirSync(path.join(userHome, 'Documents'), { recursive: true });
    writeFileSync(path.join(userHome, 'Documents', 'letter.txt'), 'dear ann');
    writeFileSync(path.join(userHome, '.bashrc'), 'set -o vi');
    const own = createEngine({
      home: canopyHome,
      secrets: new FileSecretStore(canopyHome),
      startLocalService,
    });
    try {
      await own.loginLocal({ dataDir: serviceData });
      await own.createBucket({ name: 'Home', type: 'backup', storageClass: 'hot' });
      const plan = await own.planBackup({ dir: userHome });
      expect(
        plan.excluded.filter((item) => item.by.from === 'canopy').map((item) => item.path),
      ).toEqual(['.local/share/canopy/client', '.local/share/canopy/server']);
      expect(plan.files).toBe(2);
      const first = await own.backup({ dir: userHome, bucket: 'Home' });
      expect(first).toMatchObject({ files: 2, newBytes: 'dear ann'.length + 'set -o vi'.length });
      // Its state and the service's packs changed with that backup; the user's files did not.
      const second = await own.backup({ dir: userHome, bucket: 'Home' });
      expect(second).toMatchObject({ unchanged: true, versionId: first.versionId });
      expect(
        (await own.ls({ bucket: 'Home', path: '.local/share/canopy' })).map((entry) => entry.name),
      ).toEqual([]);
    } finally {
      await own.close();
    }
  });
});

describe('restore beside what is there', () => {
  it('puts a folder beside a file of its name, and never replaces a folder with a file', async () => {
    const target = path.join(scratch, 'clashes');
    mkdirSync(target);
    writeFileSync(path.join(target, 'a'), 'a file where the backup has a folder');
    mkdirSync(path.join(target, 'old.txt'));
    const restored = await engine.restore({ bucket: 'Everything', to: target, overwrite: false });
    expect(restored.renamed).toEqual(
      expect.arrayContaining(['a (restored)', 'old (restored).txt']),
    );
    expect(readFileSync(path.join(target, 'a'), 'utf8')).toBe(
      'a file where the backup has a folder',
    );
    expect(readdirSync(path.join(target, 'old.txt'))).toEqual([]);
    expect(readFileSync(path.join(target, 'old (restored).txt'), 'utf8')).toBe('from 1999');
    expect(fingerprintTree(path.join(target, 'a (restored)'))).toEqual(
      fingerprintTree(path.join(source, 'a')),
    );

    // Asked to overwrite, the file gives way to the folder; the folder stays.
    const again = await engine.restore({
      bucket: 'Everything',
      to: target,
      overwrite: true,
    });
    expect(again.renamed).toEqual(['old (restored 2).txt']);
    expect(fingerprintTree(path.join(target, 'a'))).toEqual(
      fingerprintTree(path.join(source, 'a')),
    );
    expect(readdirSync(path.join(target, 'old.txt'))).toEqual([]);
  });

  it('says where it may not write when the target is on a read-only disk', async () => {
    const readOnly = path.join(scratch, 'read-only-disk');
    mkdirSync(readOnly);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', readOnly], {
      encoding: 'utf8',
    });
    expect(mounted.status, mounted.stderr).toBe(0);
    try {
      await expect(
        engine.restore({
          bucket: 'Everything',
          to: path.join(readOnly, 'back'),
          overwrite: false,
        }),
      ).rejects.toMatchObject({
        code: 'permission_denied',
        message: `cannot write in ${readOnly}: the disk is read-only`,
      });
    } finally {
      spawnSync('umount', [readOnly]);
    }
  });

  it('refuses a target that is a file, is under one, links to nothing, or where no folder can be made', async () => {
    const file = path.join(scratch, 'not-a-folder.txt');
    writeFileSync(file, 'keep me');
    await expect(
      engine.restore({ bucket: 'Everything', to: file, overwrite: false }),
    ).rejects.toMatchObject({
      code: 'usage',
      message: `${file} is not a folder; a restore writes into a folder`,
    });
    expect(readFileSync(file, 'utf8')).toBe('keep me');
    // A file where a folder above the target would be.
    for (const under of [path.join(file, 'back'), path.join(file, 'back', 'deeper')])
      await expect(
        engine.restore({ bucket: 'Everything', to: under, overwrite: false }),
      ).rejects.toMatchObject({
        code: 'usage',
        message: `no folder can be made at ${under}: ${file} is a file`,
      });
    expect(readFileSync(file, 'utf8')).toBe('keep me');
    const dangling = path.join(scratch, 'dangling');
    symlinkSync(path.join(scratch, 'nowhere'), dangling);
    await expect(
      engine.restore({ bucket: 'Everything', to: dangling, overwrite: false }),
    ).rejects.toMatchObject({
      code: 'usage',
      message: `no folder can be made at ${dangling}: it is a symbolic link to ${path.join(scratch, 'nowhere')}, which is not there`,
    });
    // Node's own recursive mkdir never returns here.
    await expect(
      engine.restore({ bucket: 'Everything', to: '/proc/canopy-restore', overwrite: false }),
    ).rejects.toMatchObject({
      code: 'usage',
      message: 'no folder can be made at /proc/canopy-restore',
    });
  });
});

describe('folder modes', () => {
  /** A folder's permission bits. */
  const modeOf = (dir: string): number => lstatSync(dir).mode & 0o7777;

  it("keeps a folder's mode when backed up through a symlink, and never changes folders that were there unless asked", async () => {
    // The user's Documents is a link to a private folder on another disk.
    const real = path.join(scratch, 'data-disk', 'documents');
    mkdirSync(path.join(real, 'taxes'), { recursive: true });
    writeFileSync(path.join(real, 'taxes', '2025.pdf'), 'return');
    chmodSync(path.join(real, 'taxes'), 0o700);
    chmodSync(real, 0o750);
    const link = path.join(scratch, 'Documents');
    symlinkSync(real, link);
    await engine.createBucket({ name: 'Linked', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: link, bucket: 'Linked' });

    // A new folder gets the modes that were backed up: the folder's own, not the link's
    // rwxrwxrwx, which would have made it writable by everyone.
    const fresh = path.join(scratch, 'linked-fresh');
    await engine.restore({ bucket: 'Linked', to: fresh, overwrite: false });
    expect([modeOf(fresh), modeOf(path.join(fresh, 'taxes'))]).toEqual([0o750, 0o700]);

    // Folders that were there keep theirs; asked to overwrite, those inside the target take the
    // version's, and the target, whatever folder the user named, still keeps its own.
    const existing = path.join(scratch, 'linked-existing');
    mkdirSync(path.join(existing, 'taxes'), { recursive: true });
    chmodSync(path.join(existing, 'taxes'), 0o777);
    chmodSync(existing, 0o711);
    await engine.restore({ bucket: 'Linked', to: existing, overwrite: false });
    expect([modeOf(existing), modeOf(path.join(existing, 'taxes'))]).toEqual([0o711, 0o777]);
    expect(readFileSync(path.join(existing, 'taxes', '2025.pdf'), 'utf8')).toBe('return');
    await engine.restore({ bucket: 'Linked', to: existing, overwrite: true });
    expect([modeOf(existing), modeOf(path.join(existing, 'taxes'))]).toEqual([0o711, 0o700]);
  });

  it('backs up one folder by any of its paths as the same source, with its rules and its file index', async () => {
    // Backed up as ~/Projects, a link to a folder on another disk; then as that folder, which
    // is also what `canopy backup .` is given from inside the link.
    const real = path.join(scratch, 'other-disk', 'projects');
    mkdirSync(path.join(real, 'site'), { recursive: true });
    writeFileSync(path.join(real, 'site', 'index.html'), '<p>hi</p>');
    writeFileSync(path.join(real, 'build.log'), 'noise');
    // Dated back: a file modified right before a backup is read again by the next one.
    const aMinuteAgo = new Date(Date.now() - 60_000);
    utimesSync(path.join(real, 'site', 'index.html'), aMinuteAgo, aMinuteAgo);
    const link = path.join(scratch, 'Projects');
    symlinkSync(real, link);
    await engine.setExcludeRules({ dir: link, rules: ['*.log'] });
    await engine.createBucket({ name: 'Projects', type: 'backup', storageClass: 'hot' });
    const first = await engine.backup({ dir: link, bucket: 'Projects' });
    expect(first.files).toBe(1);
    expect((await engine.planBackup({ dir: real })).excluded.map((item) => item.path)).toEqual([
      'build.log',
    ]);

    // The rules kept by one path are those of the other; kept again, they stay one list.
    expect((await engine.excludeRules({ dir: real })).kept).toEqual(['*.log']);
    await engine.setExcludeRules({ dir: real, rules: ['*.log', 'cache/'] });
    expect((await engine.excludeRules({ dir: link })).kept).toEqual(['*.log', 'cache/']);

    const again = await engine.backup({ dir: real, bucket: 'Projects' });
    expect(again).toMatchObject({ versionId: first.versionId, unchanged: true, bytesRead: 0 });
    writeFileSync(path.join(real, 'site', 'about.html'), '<p>about</p>');
    const changed = await engine.backup({ dir: real, bucket: 'Projects' });
    expect(changed).toMatchObject({ files: 2, filesUnchanged: 1 });
    // Its versions name the folder by the path it was first backed up by, as the shell gives it.
    const listed = await engine.ls({ bucket: 'Projects', path: path.join(link, 'site') });
    expect(listed.map((entry) => entry.name)).toEqual(['about.html', 'index.html']);

    // With no file index of it (this computer's state rebuilt), the folder by its other path is
    // still the bucket's source, not another one.
    const state = new Database(path.join(scratch, 'home', 'state.sqlite'));
    try {
      state.prepare('DELETE FROM file_index_sources').run();
    } finally {
      state.close();
    }
    writeFileSync(path.join(real, 'site', 'contact.html'), '<p>write</p>');
    const rebuilt = await engine.backup({ dir: real, bucket: 'Projects' });
    expect(rebuilt).toMatchObject({ files: 3, filesUnchanged: 0 });
    // Another folder still is another source.
    await expect(engine.backup({ dir: source, bucket: 'Projects' })).rejects.toThrow(
      /this bucket holds backups of/,
    );
  });
});

describe('times before 1970', () => {
  it('keeps them, to the fraction of a second, for files, folders and symlinks', async () => {
    const old = path.join(scratch, 'old-times');
    mkdirSync(path.join(old, 'letters'), { recursive: true });
    writeFileSync(path.join(old, 'letters', 'from-1960.txt'), 'dear ann');
    symlinkSync('letters/from-1960.txt', path.join(old, 'latest'));
    writeFileSync(path.join(old, 'letters', 'to-1958.txt'), 'dear bo');
    // In nanoseconds since 1970: Linux keeps them, and a restore keeps them to the nearest
    // microsecond (Node's utimes takes no finer), before 1970 as after.
    const times = {
      'letters/from-1960.txt': -315_619_199_500_000_000n,
      'letters/to-1958.txt': -378_691_199_876_543_211n,
      latest: -749_999_999n,
      letters: -14_182_940_000_000_000n,
    };
    for (const [name, ns] of Object.entries(times)) {
      const sign = ns < 0n ? '-' : '';
      const abs = ns < 0n ? -ns : ns;
      const seconds = `${sign}${abs / 1_000_000_000n}.${String(abs % 1_000_000_000n).padStart(9, '0')}`;
      const touched = spawnSync('touch', ['-h', '-d', `@${seconds}`, path.join(old, name)], {
        encoding: 'utf8',
      });
      expect(touched.status, touched.stderr).toBe(0);
      expect([name, lstatSync(path.join(old, name), { bigint: true }).mtimeNs]).toEqual([name, ns]);
    }
    await engine.createBucket({ name: 'Old', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: old, bucket: 'Old' });
    const listed = await engine.ls({ bucket: 'Old', path: 'letters' });
    expect(listed.map((entry) => entry.mtime)).toEqual([
      Date.UTC(1960, 0, 1) / 1000,
      Date.UTC(1958, 0, 1) / 1000,
    ]);

    const target = path.join(scratch, 'old-times-restored');
    await engine.restore({ bucket: 'Old', to: target, overwrite: false });
    const restored = {
      'letters/from-1960.txt': -315_619_199_500_000_000n,
      'letters/to-1958.txt': -378_691_199_876_543_000n,
      latest: -750_000_000n,
      letters: -14_182_940_000_000_000n,
    };
    for (const [name, ns] of Object.entries(restored))
      expect([name, lstatSync(path.join(target, name), { bigint: true }).mtimeNs]).toEqual([
        name,
        ns,
      ]);
  });
});

describe('times from 2038 on', () => {
  it('keeps them for small, large and many-chunk files, folders and symlinks', async () => {
    const future = path.join(scratch, 'future-times');
    mkdirSync(path.join(future, 'plans'), { recursive: true });
    writeFileSync(path.join(future, 'plans', 'small.txt'), 'see you in 2038');
    writeFileSync(path.join(future, 'plans', 'one-chunk.bin'), randomBytes((1 << 20) - 1));
    writeFileSync(path.join(future, 'plans', 'three-chunks.bin'), randomBytes((2 << 20) + 1));
    symlinkSync('plans/small.txt', path.join(future, 'link'));
    // Past 2^31 seconds (2038-01-19 03:14:08 UTC), which ipfs-unixfs wrote as 1970, up to the
    // last second below 2^32 (2106-02-07 06:28:15 UTC).
    const times = {
      'plans/small.txt': 2_147_483_648_000_000_000n,
      'plans/one-chunk.bin': 2_147_483_648_500_000_000n,
      'plans/three-chunks.bin': 4_102_444_800_000_000_000n,
      link: 3_000_000_000_000_001_000n,
      plans: 4_294_967_295_000_000_000n,
    };
    for (const [name, ns] of Object.entries(times)) {
      const seconds = `${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, '0')}`;
      const touched = spawnSync('touch', ['-h', '-d', `@${seconds}`, path.join(future, name)], {
        encoding: 'utf8',
      });
      expect(touched.status, touched.stderr).toBe(0);
    }
    await engine.createBucket({ name: 'Future', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: future, bucket: 'Future' });
    const listed = await engine.ls({ bucket: 'Future', path: 'plans' });
    expect(listed.map((entry) => [entry.name, entry.mtime])).toEqual([
      ['one-chunk.bin', 2_147_483_648],
      ['small.txt', 2_147_483_648],
      ['three-chunks.bin', 4_102_444_800],
    ]);

    const target = path.join(scratch, 'future-times-restored');
    await engine.restore({ bucket: 'Future', to: target, overwrite: false });
    for (const [name, ns] of Object.entries(times))
      expect([name, lstatSync(path.join(target, name), { bigint: true }).mtimeNs]).toEqual([
        name,
        ns,
      ]);
  });
});

describe('browse, snapshots and verify', () => {
  it("lists a version's folders with sizes, modes and symlink targets, from metadata only", async () => {
    const top = await engine.ls({ bucket: 'Everything' });
    expect(top.find((entry) => entry.name === 'run.sh')).toMatchObject({
      type: 'file',
      mode: 0o755,
      size: 18,
    });
    expect(top.find((entry) => entry.name === 'shortcut')).toMatchObject({
      type: 'symlink',
      target: 'a/b/c/d/e/five-MiB.bin',
    });
    expect(top.find((entry) => entry.name === 'old.txt')?.mtime).toBe(
      Date.parse('1999-12-31T23:59:59Z') / 1000,
    );
    const deep = await engine.ls({ bucket: 'Everything', path: 'a/b/c/d/e' });
    expect(deep).toEqual([expect.objectContaining({ name: 'five-MiB.bin', size: 5 << 20 })]);
    await expect(engine.ls({ bucket: 'Everything', path: 'missing' })).rejects.toThrow(
      'no missing in this version (canopy ls without a path shows what is there, canopy history the versions that hold it)',
    );
    await expect(engine.ls({ bucket: 'Everything', path: 'a/b/nope' })).rejects.toThrow(
      'no a/b/nope in this version (canopy ls "a/b" shows what is there, canopy history the versions that hold it)',
    );
    await expect(engine.ls({ bucket: 'Everything', path: 'a/nope/c/d' })).rejects.toThrow(
      'no a/nope/c/d in this version (canopy ls "a" shows what is there,',
    );
    // Below a file, the folder that holds the file.
    await expect(
      engine.ls({ bucket: 'Everything', path: 'a/b/c/d/e/five-MiB.bin/more' }),
    ).rejects.toThrow('(canopy ls "a/b/c/d/e" shows what is there,');
  });

  it('lists everything below a folder by its path, as the folder backed up holds it', async () => {
    const all = await engine.ls({ bucket: 'Everything', recursive: true });
    const held = fingerprintTree(source);
    expect(all.map((entry) => entry.path)).toEqual(expect.arrayContaining([...held.keys()]));
    expect(all).toHaveLength(held.size);
    for (const entry of all) {
      const print = held.get(entry.path ?? '');
      const onDisk = lstatSync(path.join(source, entry.path ?? ''));
      if (print?.type === 'file')
        expect(entry).toMatchObject({
          type: 'file',
          size: onDisk.size,
          mode: print.mode,
          mtime: Math.floor(onDisk.mtimeMs / 1000),
        });
      else if (print?.type === 'symlink')
        expect(entry).toMatchObject({ type: 'symlink', target: print.target });
      else expect(entry).toMatchObject({ type: 'directory', mode: print?.mode });
      expect(entry.name).toBe(path.basename(entry.path ?? ''));
    }
    // Parents come before what they hold.
    const paths = all.map((entry) => entry.path ?? '');
    for (const [index, entryPath] of paths.entries())
      if (entryPath.includes('/'))
        expect(paths.indexOf(path.dirname(entryPath))).toBeLessThan(index);

    const below = await engine.ls({ bucket: 'Everything', path: 'a/b', recursive: true });
    expect(below.map((entry) => entry.path)).toEqual(['c', 'c/d', 'c/d/e', 'c/d/e/five-MiB.bin']);
    const alone = await engine.ls({ bucket: 'Everything', path: './run.sh', recursive: true });
    expect(alone).toEqual([
      expect.objectContaining({ name: 'run.sh', path: 'run.sh', mode: 0o755 }),
    ]);
    await expect(
      engine.ls({ bucket: 'Everything', path: 'a/nope', recursive: true }),
    ).rejects.toThrow(
      'no a/nope in this version (canopy ls "a" shows what is there, canopy history the versions that hold it)',
    );
  });

  it('restores from a snapshot of an older version and verifies every block', async () => {
    const snapshots = await engine.listSnapshots({ bucket: 'Everything' });
    const oldest = snapshots.at(-1);
    expect(oldest?.state).toBe('completed');
    const target = path.join(scratch, 'from-snapshot');
    await engine.restore({
      bucket: 'Everything',
      snapshot: oldest?.id ?? '',
      path: '1MiB-plus-1',
      to: target,
      overwrite: false,
    });
    const restored = readFileSync(path.join(target, '1MiB-plus-1'));
    const current = readFileSync(path.join(source, '1MiB-plus-1'));
    expect(restored.length).toBe(current.length);
    expect(restored.subarray(0, -1).equals(current.subarray(0, -1))).toBe(true);
    expect(restored.at(-1)).toBe((current.at(-1) ?? 0) ^ 0xff);
    const seen: VerifyProgress[] = [];
    const verified = await engine.verify({
      bucket: 'Everything',
      all: true,
      onProgress: (progress) => seen.push(progress),
    });
    expect(verified.checked).toBe(verified.total);
    expect(verified.total).toBeGreaterThan(10);
    // Trusting nothing local, it fetches the version's metadata CAR first, then the blocks.
    const pulling = seen.filter((progress) => progress.phase === 'pulling');
    const verifying = seen.filter((progress) => progress.phase === 'verifying');
    expect(seen).toEqual([...pulling, ...verifying]);
    const carBytes = storedCarBytes(path.join(scratch, 'home', 'local-server'), verified.versionId);
    expect(pulling.at(-1)).toEqual({
      phase: 'pulling',
      blocksDone: 0,
      blocksTotal: 0,
      bytesDone: carBytes,
      bytesTotal: carBytes,
      etaSeconds: 0,
    });
    expect(verifying.at(-1)).toEqual({
      phase: 'verifying',
      blocksDone: verified.total,
      blocksTotal: verified.total,
      bytesDone: verified.bytes,
      bytesTotal: verified.bytes,
      etaSeconds: 0,
    });
    for (const phase of [pulling, verifying])
      for (const [index, progress] of phase.entries())
        expect(progress.bytesDone).toBeGreaterThanOrEqual(phase[index - 1]?.bytesDone ?? 0);
  });

  it('restores the rest when the server sends a damaged block, and lists the file that needs it', async () => {
    const tree = path.join(scratch, 'to-damage');
    mkdirSync(tree, { recursive: true });
    const damagedContent = randomBytes((1 << 20) + 4096);
    const fine = randomBytes(3000);
    writeFileSync(path.join(tree, 'damaged.bin'), damagedContent);
    writeFileSync(path.join(tree, 'fine.txt'), fine);
    // Written long ago: the file index vouches for both files, which need not be read again.
    for (const name of ['damaged.bin', 'fine.txt'])
      utimesSync(path.join(tree, name), new Date('2020-05-01'), new Date('2020-05-01'));
    await engine.createBucket({ name: 'Damaged', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: tree, bucket: 'Damaged' });
    // The host's copy of the file's first chunk is overwritten with other bytes of its length.
    const leaf = cidText(await rawCidOf(damagedContent.subarray(0, 1 << 20)));
    damageStoredBlock(path.join(scratch, 'home', 'local-server'), leaf);
    const target = path.join(scratch, 'restored-damaged');
    const result = await engine.restore({ bucket: 'Damaged', to: target, overwrite: false });
    expect(result.notRestored).toEqual([
      { path: 'damaged.bin', reason: `block ${leaf} came back from the server damaged` },
    ]);
    expect(result.files).toBe(1);
    const verified = await engine.verify({ bucket: 'Damaged', all: true });
    expect(verified.unavailable).toEqual([{ cid: leaf, why: 'damaged' }]);
    expect(verified.unrestorable).toEqual(result.notRestored);
    // No partial or temporary copy of the damaged file is left, and the other file is whole.
    expect(readdirSync(target)).toEqual(['fine.txt']);
    expect(readFileSync(path.join(target, 'fine.txt')).equals(fine)).toBe(true);

    // The next backup sends the damaged block again, though the source did not change and the
    // host counts it held; the file then restores whole, and the backup after sends nothing.
    // Its progress counts the file read to send the block among the bytes to read.
    const reading: BackupProgress[] = [];
    const healed = await engine.backup({
      dir: tree,
      bucket: 'Damaged',
      onProgress: (progress) => {
        if (progress.phase === 'reading') reading.push(progress);
      },
    });
    expect(healed.blocksResent).toBe(1);
    expect(healed.bytesRead).toBe(damagedContent.length);
    expect(reading.at(-1)).toMatchObject({
      bytesDone: damagedContent.length,
      bytesTotal: damagedContent.length,
      etaSeconds: 0,
    });
    expect(healed.bytesUploaded).toBeGreaterThanOrEqual(1 << 20);
    expect((await engine.verify({ bucket: 'Damaged', all: true })).unavailable).toEqual([]);
    const again = path.join(scratch, 'restored-healed');
    const whole = await engine.restore({ bucket: 'Damaged', to: again, overwrite: false });
    expect(whole.notRestored).toEqual([]);
    expect(readFileSync(path.join(again, 'damaged.bin')).equals(damagedContent)).toBe(true);
    const after = await engine.backup({ dir: tree, bucket: 'Damaged' });
    expect(after).toMatchObject({ unchanged: true, blocksResent: 0, bytesUploaded: 0 });
  });

  it('restores the rest when the server has lost a block, and lists the files that need it', async () => {
    const tree = path.join(scratch, 'to-lose');
    mkdirSync(tree, { recursive: true });
    const lostContent = randomBytes(3 * (1 << 20) + 17);
    // Stored twice: both copies need the lost block.
    writeFileSync(path.join(tree, 'a-lost.bin'), lostContent);
    writeFileSync(path.join(tree, 'b-lost-copy.bin'), lostContent);
    // Many files after them, fetched in the same batches as the lost block.
    const kept = Array.from({ length: 40 }, () => randomBytes(5000));
    kept.forEach((bytes, index) => writeFileSync(path.join(tree, `c-kept-${index}.txt`), bytes));
    await engine.createBucket({ name: 'Lost', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: tree, bucket: 'Lost' });
    // The host forgets where its copy of the file's second chunk is, as if the disk lost it.
    const leaf = cidText(await rawCidOf(lostContent.subarray(1 << 20, 2 << 20)));
    const db = new Database(path.join(scratch, 'home', 'local-server', 'service.sqlite'));
    try {
      expect(db.prepare('DELETE FROM blocks WHERE cid = ?').run(leaf).changes).toBe(1);
    } finally {
      db.close();
    }
    const target = path.join(scratch, 'restored-lost');
    const result = await engine.restore({ bucket: 'Lost', to: target, overwrite: false });
    const reason = `the server no longer holds block ${leaf}`;
    expect(result.notRestored).toEqual([
      { path: 'a-lost.bin', reason },
      { path: 'b-lost-copy.bin', reason },
    ]);
    expect(readdirSync(target).sort()).toEqual(
      kept.map((_, index) => `c-kept-${index}.txt`).sort(),
    );
    kept.forEach((bytes, index) =>
      expect(readFileSync(path.join(target, `c-kept-${index}.txt`)).equals(bytes)).toBe(true),
    );
    // A file of the user's has the name meanwhile: the version's copy, which cannot be made,
    // is not told as restored beside it.
    writeFileSync(path.join(target, 'a-lost.bin'), 'mine');
    const again = await engine.restore({ bucket: 'Lost', to: target, overwrite: false });
    expect(again).toMatchObject({
      notRestored: result.notRestored,
      renamed: [],
      restoredBeside: [],
      alreadyThere: kept.length,
    });
    expect(existsSync(path.join(target, 'a-lost (restored).bin'))).toBe(false);
    rmSync(path.join(target, 'a-lost.bin'));
    // verify checks every other block too, and names the files a restore leaves out.
    const seen: VerifyProgress[] = [];
    const verified = await engine.verify({
      bucket: 'Lost',
      all: true,
      onProgress: (progress) => seen.push(progress),
    });
    // Every block is answered for; the lost one's bytes never come.
    expect(seen.at(-1)).toMatchObject({
      blocksDone: verified.total,
      blocksTotal: verified.total,
      bytesDone: verified.bytes,
      bytesTotal: verified.bytes + (1 << 20),
    });
    expect(verified).toMatchObject({ checked: verified.total, total: 4 + kept.length });
    expect(verified.unavailable).toEqual([{ cid: leaf, why: 'missing' }]);
    expect(verified.unrestorable).toEqual(result.notRestored);
    expect(verified.bytes).toBe(3 * (1 << 20) + 17 - (1 << 20) + 5000 * kept.length);
  });
});
