import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { CarFileNodes } from '../../main/uploader/car-file-nodes.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// The file index: an unchanged source makes no version and reads nothing; a changed one reads
// only what changed; and the index is never trusted beyond the version the bucket holds. Nor is
// it trusted for files it must not vouch for: one modified right before a backup (a change in
// the same clock tick keeps its mtime), and one that kept changing while read (maybe torn).

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-index-'));
const home = path.join(scratch, 'home');
let engine: Engine;
/** Runs after each file is read, before it is checked for changes; tests set it. */
let onFileRead: (relativePath: string) => void = () => undefined;

function makeSource(name: string): string {
  const dir = path.join(scratch, name);
  writeSettled(path.join(dir, 'photos', 'one.jpg'), randomBytes(300_000));
  writeSettled(path.join(dir, 'photos', 'two.jpg'), randomBytes(1_500_000));
  writeSettled(path.join(dir, 'notes.txt'), `notes of ${name}`);
  return dir;
}

beforeAll(async () => {
  engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    afterFileRead: (relativePath) => {
      onFileRead(relativePath);
      return Promise.resolve();
    },
  });
  await engine.loginLocal({});
  await engine.createBucket({ name: 'Index', type: 'backup', storageClass: 'hot' });
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the file index', () => {
  it('recognises an unchanged source, and notices deletions, new folders and mode changes', async () => {
    const source = makeSource('docs');
    const first = await engine.backup({ dir: source, bucket: 'Index' });
    expect(first).toMatchObject({ unchanged: false, files: 3, filesUnchanged: 0 });
    expect(first.bytesRead).toBe(first.bytesScanned);

    const again = await engine.backup({ dir: source, bucket: 'Index' });
    expect(again).toMatchObject({ unchanged: true, versionId: first.versionId, bytesRead: 0 });

    rmSync(path.join(source, 'notes.txt'));
    const deleted = await engine.backup({ dir: source, bucket: 'Index' });
    expect(deleted).toMatchObject({ unchanged: false, files: 2, filesUnchanged: 2, bytesRead: 0 });
    expect((await engine.ls({ bucket: 'Index' })).map((entry) => entry.name)).toEqual(['photos']);
    // The deleted file's block left the new version's set (deleted_block_cids): its snapshot
    // counts the photos' bytes alone.
    const [newest, older] = await engine.listSnapshots({ bucket: 'Index' });
    expect(newest?.metadata_id).toBe(deleted.versionId);
    expect(newest?.size).toBe(300_000 + 1_500_000);
    expect(older?.size).toBe(300_000 + 1_500_000 + 'notes of docs'.length);

    mkdirSync(path.join(source, 'empty folder'));
    const folder = await engine.backup({ dir: source, bucket: 'Index' });
    expect(folder).toMatchObject({ unchanged: false, bytesRead: 0 });
    expect((await engine.ls({ bucket: 'Index' })).map((entry) => entry.name)).toEqual([
      'empty folder',
      'photos',
    ]);

    // A chmod moves the file's ctime, which a rewrite with its mtime set back moves too: it is
    // read again, and sends nothing.
    chmodSync(path.join(source, 'photos', 'two.jpg'), 0o600);
    const mode = await engine.backup({ dir: source, bucket: 'Index' });
    expect(mode).toMatchObject({ unchanged: false, bytesRead: 1_500_000, newBytes: 0 });
    const photos = await engine.ls({ bucket: 'Index', path: 'photos' });
    expect(photos.find((entry) => entry.name === 'two.jpg')?.mode).toBe(0o600);

    const versions = await engine.listVersions({ bucket: 'Index' });
    expect(versions).toHaveLength(4);
  });

  it('walks again only the folders holding a change, and stores the tree and blocks a full walk would', async () => {
    await engine.createBucket({ name: 'Folders', type: 'backup', storageClass: 'hot' });
    await engine.createBucket({ name: 'Walked', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'folders');
    for (const top of ['a', 'b', 'c'])
      for (const sub of ['x', 'y'])
        for (let i = 0; i < 3; i += 1)
          writeSettled(path.join(source, top, sub, `f${i}.txt`), `${top}/${sub}/${i}`);
    // A file of three leaves, the same content in two folders, a symlink and an empty folder.
    writeSettled(path.join(source, 'b', 'big.bin'), randomBytes(2 * 1024 * 1024 + 5));
    writeSettled(path.join(source, 'a', 'y', 'same.txt'), 'same');
    writeSettled(path.join(source, 'c', 'x', 'same.txt'), 'same');
    symlinkSync('../x/f0.txt', path.join(source, 'c', 'y', 'link'));
    mkdirSync(path.join(source, 'c', 'empty'));
    const first = await engine.backup({ dir: source, bucket: 'Folders' });
    expect(first).toMatchObject({ files: 21 });

    // One file changes: the other folders' nodes come from the version before, not a walk.
    const nodesCopied = vi.spyOn(CarFileNodes.prototype, 'get');
    writeSettled(path.join(source, 'a', 'x', 'f1.txt'), 'changed');
    const changed = await engine.backup({ dir: source, bucket: 'Folders' });
    expect(changed).toMatchObject({ files: 21, filesUnchanged: 20, bytesRead: 'changed'.length });
    expect(nodesCopied).toHaveBeenCalled();
    nodesCopied.mockRestore();
    // The same tree as a backup that walks it all (another bucket, no index), and the same
    // block set: the leaves of the folders not walked are still the version's.
    const walked = await engine.backup({ dir: source, bucket: 'Walked' });
    expect(walked.filesUnchanged).toBe(0);
    const rootOf = async (bucket: string, id: string) =>
      (await engine.listVersions({ bucket })).find((version) => version.id === id)?.root_cid;
    expect(await rootOf('Folders', changed.versionId)).toBe(
      await rootOf('Walked', walked.versionId),
    );
    const [folderSnapshot] = await engine.listSnapshots({ bucket: 'Folders' });
    const [walkedSnapshot] = await engine.listSnapshots({ bucket: 'Walked' });
    expect(folderSnapshot?.metadata_id).toBe(changed.versionId);
    expect(folderSnapshot?.size).toBe(walkedSnapshot?.size);

    // The index kept what was under the folders not walked: a change there is seen, and the
    // rest is known.
    writeSettled(path.join(source, 'b', 'y', 'f2.txt'), 'again');
    const deeper = await engine.backup({ dir: source, bucket: 'Folders' });
    expect(deeper).toMatchObject({ files: 21, filesUnchanged: 20, bytesRead: 'again'.length });
    const still = await engine.backup({ dir: source, bucket: 'Folders' });
    expect(still).toMatchObject({ unchanged: true, versionId: deeper.versionId });
    const target = path.join(scratch, 'restored-folders');
    await engine.restore({ bucket: 'Folders', to: target, overwrite: false });
    // Compared with equals: vitest compares a Buffer of 2 MiB byte by byte, for seconds.
    for (const file of ['a/x/f1.txt', 'b/y/f2.txt', 'b/big.bin', 'c/x/same.txt', 'a/y/f0.txt'])
      expect(
        readFileSync(path.join(target, file)).equals(readFileSync(path.join(source, file))),
        file,
      ).toBe(true);
    expect(readlinkSync(path.join(target, 'c', 'y', 'link'))).toBe('../x/f0.txt');
    expect(lstatSync(path.join(target, 'c', 'empty')).isDirectory()).toBe(true);
  });

  it('does not read again the files of a folder renamed or moved, and reads a file renamed', async () => {
    await engine.createBucket({ name: 'Moved', type: 'backup', storageClass: 'hot' });
    await engine.createBucket({ name: 'MovedWalked', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'moved');
    writeSettled(path.join(source, '2024', 'trip', 'beach.jpg'), randomBytes(2 * 1024 * 1024 + 7));
    writeSettled(path.join(source, '2024', 'trip', 'hill.jpg'), randomBytes(400_000));
    writeSettled(path.join(source, '2024', 'notes.txt'), 'notes of 2024');
    writeSettled(path.join(source, 'inbox', 'scan.pdf'), randomBytes(300_000));
    const first = await engine.backup({ dir: source, bucket: 'Moved' });
    expect(first).toMatchObject({ files: 4 });

    // A folder renamed, with a folder moved into it: only the file renamed is read.
    mkdirSync(path.join(source, 'archive'));
    renameSync(path.join(source, '2024'), path.join(source, 'archive', 'year 2024'));
    renameSync(path.join(source, 'inbox'), path.join(source, 'archive', 'year 2024', 'inbox'));
    renameSync(
      path.join(source, 'archive', 'year 2024', 'notes.txt'),
      path.join(source, 'archive', 'year 2024', 'notes of 2024.txt'),
    );
    const read: string[] = [];
    onFileRead = (relativePath) => read.push(relativePath);
    try {
      const moved = await engine.backup({ dir: source, bucket: 'Moved' });
      expect(moved).toMatchObject({
        files: 4,
        filesUnchanged: 3,
        bytesRead: 'notes of 2024'.length,
        newBytes: 0,
      });
      expect(read).toEqual(['archive/year 2024/notes of 2024.txt']);
      // The tree a backup that reads every file makes (another bucket, no index).
      const walked = await engine.backup({ dir: source, bucket: 'MovedWalked' });
      expect(walked.bytesRead).toBe(walked.bytesScanned);
      const rootOf = async (bucket: string, id: string) =>
        (await engine.listVersions({ bucket })).find((version) => version.id === id)?.root_cid;
      expect(await rootOf('Moved', moved.versionId)).toBe(
        await rootOf('MovedWalked', walked.versionId),
      );
      const again = await engine.backup({ dir: source, bucket: 'Moved' });
      expect(again).toMatchObject({ unchanged: true, versionId: moved.versionId });

      // A moved file whose mtime changed since (its bytes may have) is read.
      read.length = 0;
      const hill = path.join(source, 'archive', 'year 2024', 'trip', 'hill.jpg');
      const changed = randomBytes(400_000);
      writeSettled(hill, changed);
      renameSync(path.join(source, 'archive', 'year 2024', 'trip'), path.join(source, 'trip'));
      const rewritten = await engine.backup({ dir: source, bucket: 'Moved' });
      expect(read).toEqual(['trip/hill.jpg']);
      expect(rewritten).toMatchObject({ filesUnchanged: 3, bytesRead: 400_000 });
    } finally {
      onFileRead = () => undefined;
    }
    const target = path.join(scratch, 'restored-moved');
    await engine.restore({ bucket: 'Moved', to: target, overwrite: false });
    for (const file of [
      'trip/beach.jpg',
      'trip/hill.jpg',
      'archive/year 2024/notes of 2024.txt',
      'archive/year 2024/inbox/scan.pdf',
    ])
      expect(
        readFileSync(path.join(target, file)).equals(readFileSync(path.join(source, file))),
        file,
      ).toBe(true);
  });

  it('re-reads every file when the bucket no longer holds the version the index describes', async () => {
    await engine.createBucket({ name: 'Swapped', type: 'backup', storageClass: 'hot' });
    const mine = makeSource('mine');
    const other = makeSource('other');
    const first = await engine.backup({ dir: mine, bucket: 'Swapped' });
    // Another source replaces the bucket's content: its active version lacks mine's File nodes.
    await engine.backup({ dir: other, bucket: 'Swapped', replaceSource: true });
    const back = await engine.backup({ dir: mine, bucket: 'Swapped', replaceSource: true });
    expect(back).toMatchObject({ unchanged: false, filesUnchanged: 0 });
    expect(back.bytesRead).toBe(first.bytesScanned);
    const target = path.join(scratch, 'restored-mine');
    await engine.restore({ bucket: 'Swapped', to: target, overwrite: false });
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('notes of mine');
    expect(
      readFileSync(path.join(target, 'photos', 'two.jpg')).equals(
        readFileSync(path.join(mine, 'photos', 'two.jpg')),
      ),
    ).toBe(true);
  });

  it('spares unchanged files with an index from before it listed their leaves, and lists them from then on', async () => {
    await engine.createBucket({ name: 'Upgraded', type: 'backup', storageClass: 'hot' });
    const source = makeSource('upgraded');
    await engine.backup({ dir: source, bucket: 'Upgraded' });
    // The index as an older Canopy wrote it: no leaves, and not marked as listing them.
    const state = new Database(path.join(home, 'state.sqlite'));
    const ofSource = 'FROM file_index_sources WHERE source_dir = ?';
    const leavesRecorded = () =>
      state.prepare(`SELECT leaves_recorded AS recorded ${ofSource}`).all(source);
    try {
      state
        .prepare(`UPDATE file_index SET leaves = NULL WHERE source_id IN (SELECT id ${ofSource})`)
        .run(source);
      state
        .prepare(`UPDATE file_index_sources SET leaves_recorded = 0 WHERE source_dir = ?`)
        .run(source);
      writeSettled(path.join(source, 'notes.txt'), 'notes changed after the upgrade');
      expect(leavesRecorded()).toEqual([{ recorded: 0 }]);
      const upgraded = await engine.backup({ dir: source, bucket: 'Upgraded' });
      expect(upgraded).toMatchObject({ unchanged: false, filesUnchanged: 2 });
      expect(upgraded.bytesRead).toBe('notes changed after the upgrade'.length);
      expect(leavesRecorded()).toEqual([{ recorded: 1 }]);
      // From the leaves the index now lists.
      writeSettled(path.join(source, 'notes.txt'), 'notes changed again');
      const listed = await engine.backup({ dir: source, bucket: 'Upgraded' });
      expect(listed).toMatchObject({ unchanged: false, filesUnchanged: 2 });
      expect(listed.bytesRead).toBe('notes changed again'.length);
    } finally {
      state.close();
    }
    const target = path.join(scratch, 'restored-upgraded');
    await engine.restore({ bucket: 'Upgraded', to: target, overwrite: false });
    expect(
      readFileSync(path.join(target, 'photos', 'two.jpg')).equals(
        readFileSync(path.join(source, 'photos', 'two.jpg')),
      ),
    ).toBe(true);
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('notes changed again');
  });

  it('reads again a file modified right before the last backup: a same-size change in that second is stored', async () => {
    await engine.createBucket({ name: 'Fresh', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'fresh');
    writeSettled(path.join(source, 'old.txt'), 'settled');
    const file = path.join(source, 'fresh.txt');
    writeFileSync(file, 'first draft');
    // A whole second just passed: the backup's scan starts within the two seconds after it.
    const thisSecond = new Date(Math.floor(Date.now() / 1000) * 1000);
    utimesSync(file, thisSecond, thisSecond);
    await engine.backup({ dir: source, bucket: 'Fresh' });
    // Same inode, same size, same mtime: only the bytes differ.
    const inode = lstatSync(file).ino;
    writeFileSync(file, 'final draft');
    utimesSync(file, thisSecond, thisSecond);
    expect(lstatSync(file).ino).toBe(inode);
    const second = await engine.backup({ dir: source, bucket: 'Fresh' });
    expect(second).toMatchObject({ unchanged: false, filesUnchanged: 1 });
    const target = path.join(scratch, 'restored-fresh');
    await engine.restore({ bucket: 'Fresh', to: target, overwrite: false });
    expect(readFileSync(path.join(target, 'fresh.txt'), 'utf8')).toBe('final draft');
  });

  it('trusts a file dated ahead once it has not been written to for a while: it is not read again by each backup', async () => {
    await engine.createBucket({ name: 'Ahead', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'ahead');
    const file = path.join(source, 'clip.mov');
    mkdirSync(source);
    writeFileSync(file, randomBytes(200_000));
    // From a camera whose clock was set years ahead.
    const ahead = new Date('2031-06-01T12:00:00Z');
    utimesSync(file, ahead, ahead);
    // Its ctime, which no program sets, ages past the two seconds the index keeps from trusting.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await engine.backup({ dir: source, bucket: 'Ahead' });
    const again = await engine.backup({ dir: source, bucket: 'Ahead' });
    expect(again).toMatchObject({ unchanged: true, bytesRead: 0 });
    // Written to since, at its size and with its date put back: read, and stored.
    writeFileSync(file, randomBytes(200_000));
    utimesSync(file, ahead, ahead);
    const changed = await engine.backup({ dir: source, bucket: 'Ahead' });
    expect(changed).toMatchObject({ unchanged: false, bytesRead: 200_000 });
  });

  it('reads again a file rewritten at its size with its mtime set back, as npm, tar and cp -p do', async () => {
    await engine.createBucket({ name: 'Packages', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'packages');
    // npm writes every file of a package with the mtime of 1985-10-26 08:15 UTC.
    const npmTime = new Date('1985-10-26T08:15:00Z');
    const manifest = path.join(source, 'node_modules', 'left-pad', 'package.json');
    const readme = path.join(source, 'node_modules', 'left-pad', 'README.md');
    for (const [file, text] of [
      [manifest, '{"version": "1.0.0"}'],
      [readme, 'pads strings'],
    ] as const) {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, text);
      utimesSync(file, npmTime, npmTime);
    }
    await engine.backup({ dir: source, bucket: 'Packages' });
    // The package updated in place: same inode, size and mtime; other bytes.
    const before = lstatSync(manifest, { bigint: true });
    writeFileSync(manifest, '{"version": "1.0.1"}');
    utimesSync(manifest, npmTime, npmTime);
    const after = lstatSync(manifest, { bigint: true });
    expect([after.ino, after.size, after.mtimeNs]).toEqual([
      before.ino,
      before.size,
      before.mtimeNs,
    ]);
    const updated = await engine.backup({ dir: source, bucket: 'Packages' });
    expect(updated).toMatchObject({
      unchanged: false,
      filesUnchanged: 1,
      bytesRead: '{"version": "1.0.1"}'.length,
    });
    const target = path.join(scratch, 'restored-packages');
    await engine.restore({ bucket: 'Packages', to: target, overwrite: false });
    expect(
      readFileSync(path.join(target, 'node_modules', 'left-pad', 'package.json'), 'utf8'),
    ).toBe('{"version": "1.0.1"}');
    const again = await engine.backup({ dir: source, bucket: 'Packages' });
    expect(again).toMatchObject({ unchanged: true, bytesRead: 0 });
  });

  it('reads again a file that kept changing while the last backup read it', async () => {
    await engine.createBucket({ name: 'Torn', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'torn');
    const file = path.join(source, 'live.log');
    writeSettled(file, 'line 1\n');
    // Each read is followed by a write and a new mtime, as a log being written would be. The
    // last read's size and mtime are what the walk saw: what an entry would record.
    let mtime = lstatSync(file).mtime;
    let seen = { size: 0, mtime };
    let writes = 0;
    onFileRead = (relativePath) => {
      if (relativePath !== 'live.log') return;
      seen = { size: lstatSync(file).size, mtime };
      writes += 1;
      appendFileSync(file, `line ${writes + 1}\n`);
      mtime = new Date(mtime.getTime() + 2000);
      utimesSync(file, mtime, mtime);
    };
    try {
      const first = await engine.backup({ dir: source, bucket: 'Torn' });
      expect(first.changedWhileRead).toEqual(['live.log']);
    } finally {
      onFileRead = () => undefined;
    }
    // The file as the torn read's entry would describe it, with other bytes.
    writeFileSync(file, 'X'.repeat(seen.size));
    utimesSync(file, seen.mtime, seen.mtime);
    const second = await engine.backup({ dir: source, bucket: 'Torn' });
    expect(second.changedWhileRead).toEqual([]);
    const target = path.join(scratch, 'restored-torn');
    await engine.restore({ bucket: 'Torn', to: target, overwrite: false });
    expect(readFileSync(path.join(target, 'live.log'), 'utf8')).toBe('X'.repeat(seen.size));
  });
});
