import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type BackupResult } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { stagedLeftovers, stagedShardFiles } from '../helpers/staged-shards.ts';

// A file that changes while it is read is read once more; one that keeps changing is reported.
// A file that changes after it was read, before its shard goes, makes the backup run again.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-changing-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Small files are read in one synchronous read, larger ones chunk by chunk: both are checked. */
const LARGE_PREFIX = 'x'.repeat(300 * 1024) + '\n';

async function backupWhile(name: string, change: (count: number) => boolean, prefix = '') {
  const source = path.join(scratch, name, 'source');
  mkdirSync(source, { recursive: true });
  writeFileSync(path.join(source, 'live.log'), `${prefix}line 1\n`);
  writeFileSync(path.join(source, 'still.txt'), 'still');
  const home = path.join(scratch, name, 'home');
  let reads = 0;
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    afterFileRead: (relativePath) => {
      if (relativePath === 'live.log' && change((reads += 1))) {
        // A later mtime second, so the change shows even on coarse clocks.
        appendFileSync(path.join(source, 'live.log'), `line ${reads + 1}\n`);
        const future = new Date(Date.now() + reads * 2000);
        utimesSync(path.join(source, 'live.log'), future, future);
      }
      return Promise.resolve();
    },
  });
  try {
    await engine.loginLocal({});
    await engine.createBucket({ name: 'Live', type: 'backup', storageClass: 'hot' });
    const result = await engine.backup({ dir: source, bucket: 'Live' });
    const target = path.join(scratch, name, 'restored');
    await engine.restore({ bucket: 'Live', to: target, overwrite: false });
    return {
      result,
      restored: readFileSync(path.join(target, 'live.log'), 'utf8'),
      current: readFileSync(path.join(source, 'live.log'), 'utf8'),
    };
  } finally {
    await engine.close();
  }
}

describe('files that change while read', () => {
  it('re-reads a file that changed once and stores its settled content', async () => {
    const { result, restored, current } = await backupWhile('once', (count) => count === 1);
    expect(result.changedWhileRead).toEqual([]);
    expect(restored).toBe(current);
    expect(restored).toBe('line 1\nline 2\n');
  });

  it('reports a file that keeps changing', async () => {
    const { result } = await backupWhile('always', () => true);
    expect(result.changedWhileRead).toEqual(['live.log']);
    expect(result.files).toBe(2);
  });

  it('re-reads a large file that changed once, and reports one that keeps changing', async () => {
    const once = await backupWhile('large-once', (count) => count === 1, LARGE_PREFIX);
    expect(once.result.changedWhileRead).toEqual([]);
    expect(once.restored).toBe(`${LARGE_PREFIX}line 1\nline 2\n`);
    const always = await backupWhile('large-always', () => true, LARGE_PREFIX);
    expect(always.result.changedWhileRead).toEqual(['live.log']);
  });
});

describe('files that change after they were read, before the upload', () => {
  // Shards are read again from the source at upload time. A file that changed (or went) in
  // between no longer matches the version's tree: that version is dropped, and the backup runs
  // again with its shards staged, so what is stored is what the tree describes.
  it.each([
    { name: 'a large file rewritten', file: 'big.bin', change: 'rewrite' },
    { name: 'a small file rewritten', file: 'note.txt', change: 'rewrite' },
    { name: 'a file deleted', file: 'big.bin', change: 'delete' },
    { name: 'a file replaced by a named pipe', file: 'big.bin', change: 'pipe' },
  ] as const)('$name: the backup still completes and restores what it read', async (spec) => {
    const run = path.join(scratch, `after-${spec.file}-${spec.change}`);
    const source = path.join(run, 'source');
    mkdirSync(source, { recursive: true });
    writeFileSync(path.join(source, 'big.bin'), randomBytes(3 << 20));
    writeFileSync(path.join(source, 'note.txt'), 'first words');
    // Files that end in a short chunk, read one after another into the same chunk buffer: the
    // staged pass must store each tail as it was read, not as the next file overwrote it.
    for (let i = 0; i < 3; i += 1)
      writeFileSync(path.join(source, `tail-${i}.bin`), randomBytes((1 << 20) + 100 + i));
    const home = path.join(run, 'home');
    let changed = false;
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      startLocalService,
      afterShardConfirmed: (confirmedSoFar) => {
        if (confirmedSoFar !== 0 || changed) return;
        changed = true;
        const file = path.join(source, spec.file);
        if (spec.change === 'delete') rmSync(file);
        else if (spec.change === 'pipe') {
          rmSync(file);
          expect(spawnSync('mkfifo', [file]).status).toBe(0);
        } else writeFileSync(file, spec.file === 'big.bin' ? randomBytes(3 << 20) : 'other words');
      },
    });
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'After', type: 'backup', storageClass: 'hot' });
      const result = await engine.backup({ dir: source, bucket: 'After' });
      expect(changed).toBe(true);
      const gone = spec.change === 'delete' || spec.change === 'pipe';
      expect(result.files).toBe(gone ? 4 : 5);
      // The dropped version is gone; only the one that was completed is listed.
      const versions = await engine.listVersions({ bucket: 'After' });
      expect(versions.map((version) => [version.id, version.state])).toEqual([
        [result.versionId, 'active'],
      ]);
      expect(stagedLeftovers(home)).toEqual([]);
      const target = path.join(run, 'restored');
      await engine.restore({ bucket: 'After', to: target, overwrite: false });
      // The pipe is not backed up on the second run: the walk skips it, as it skips devices.
      const backedUp = readdirSync(source).filter((name) => !(gone && name === spec.file));
      expect(readdirSync(target).sort()).toEqual(backedUp.sort());
      for (const name of backedUp)
        expect(
          readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
        ).toBe(true);
    } finally {
      await engine.close();
    }
  });
});

describe('a source folder moved away while it is backed up', () => {
  // Its files would each be skipped as deleted: a version of what was read before would stand
  // for a folder that is no longer there, and become the bucket's active one.
  it.each([
    { name: 'while its files are read', when: 'read' },
    { name: 'after they were read, before the upload', when: 'upload' },
  ] as const)(
    '$name: makes no version, says why, and backs it up once it is back',
    async (spec) => {
      const run = path.join(scratch, `moved-away-${spec.when}`);
      const source = path.join(run, 'source');
      const movedTo = path.join(run, 'moved');
      mkdirSync(source, { recursive: true });
      writeFileSync(path.join(source, 'first.txt'), 'backed up before');
      const home = path.join(run, 'home');
      let moveAway = false;
      const move = (): void => {
        if (!moveAway) return;
        moveAway = false;
        renameSync(source, movedTo);
      };
      const engine = createEngine({
        home,
        secrets: new FileSecretStore(home),
        startLocalService,
        afterFileRead: () => {
          if (spec.when === 'read') move();
          return Promise.resolve();
        },
        afterShardConfirmed: (confirmedSoFar) => {
          if (spec.when === 'upload' && confirmedSoFar === 0) move();
        },
      });
      try {
        await engine.loginLocal({});
        await engine.createBucket({ name: 'Moved', type: 'backup', storageClass: 'hot' });
        const before = await engine.backup({ dir: source, bucket: 'Moved' });
        for (let i = 0; i < 3; i += 1)
          writeFileSync(path.join(source, `new-${i}.bin`), randomBytes(1000 + i));
        moveAway = true;
        await expect(engine.backup({ dir: source, bucket: 'Moved' })).rejects.toMatchObject({
          code: 'not_found',
          message: `${source} was deleted or moved away during the backup: no version was made of it (the versions before are as they were)`,
        });
        expect(existsSync(movedTo)).toBe(true);
        const versions = await engine.listVersions({ bucket: 'Moved' });
        expect(versions.map((version) => [version.id, version.state])).toEqual([
          [before.versionId, 'active'],
        ]);
        expect(stagedLeftovers(home)).toEqual([]);

        renameSync(movedTo, source);
        const after = await engine.backup({ dir: source, bucket: 'Moved' });
        expect(after.files).toBe(4);
        const target = path.join(run, 'restored');
        await engine.restore({ bucket: 'Moved', to: target, overwrite: false });
        expect(readdirSync(target).sort()).toEqual(readdirSync(source).sort());
      } finally {
        await engine.close();
      }
    },
  );
});

describe('staged shards the host needs none of', () => {
  it('leave the disk once the upload is queued, not when it ends', async () => {
    // photo.jpg is in the first version, not the second, and back in the third: its blocks are
    // held (by the first), yet laid out in shards, as the second lacks them. The third's shards
    // are staged, as note.txt changes again after it was read.
    const run = path.join(scratch, 'unsent-staged');
    const source = path.join(run, 'source');
    mkdirSync(source, { recursive: true });
    const photo = randomBytes(3 << 20);
    writeFileSync(path.join(source, 'photo.jpg'), photo);
    writeFileSync(path.join(source, 'note.txt'), 'first words');
    const home = path.join(run, 'home');
    let changeNote = false;
    const stagedBytes: number[] = [];
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      startLocalService,
      shardTargetBytes: (1 << 20) + 1024,
      afterShardConfirmed: (confirmedSoFar) => {
        if (confirmedSoFar !== 0 || !changeNote) return;
        const staged = [...stagedShardFiles(home).values()];
        if (staged.length > 0) {
          stagedBytes.push(staged.reduce((sum, size) => sum + size, 0));
          return;
        }
        writeFileSync(path.join(source, 'note.txt'), 'other words');
      },
    });
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Unsent', type: 'backup', storageClass: 'hot' });
      await engine.backup({ dir: source, bucket: 'Unsent' });
      rmSync(path.join(source, 'photo.jpg'));
      await engine.backup({ dir: source, bucket: 'Unsent' });
      writeFileSync(path.join(source, 'photo.jpg'), photo);
      writeFileSync(path.join(source, 'note.txt'), 'second words');
      changeNote = true;
      const third = await engine.backup({ dir: source, bucket: 'Unsent' });
      // Staged once, when note.txt changed: of the photo's three 1 MiB shards, the one that
      // also holds the note stayed on disk to be sent, made again without the photo's held
      // leaf, and the other two went.
      expect(stagedBytes).toHaveLength(1);
      expect(stagedBytes[0]).toBeGreaterThan('other words'.length);
      expect(stagedBytes[0]).toBeLessThan(1024);
      expect(third.bytesUploaded).toBe(stagedBytes[0]);
      expect(stagedLeftovers(home)).toEqual([]);
      const target = path.join(run, 'restored');
      await engine.restore({ bucket: 'Unsent', to: target, overwrite: false });
      expect(readFileSync(path.join(target, 'photo.jpg')).equals(photo)).toBe(true);
      expect(readFileSync(path.join(target, 'note.txt'), 'utf8')).toBe('other words');
    } finally {
      await engine.close();
    }
  });
});

/**
 * Backs up a folder of a-first.txt, the `middle` files and d-last.txt, calling `change` once
 * a-first.txt was read (the walk has listed the folder by then), then restores it and backs it
 * up again. Returns both backups' results and what the restore holds.
 */
async function backUpChangedAfterWalk(
  name: string,
  middle: Record<string, Uint8Array | string>,
  change: (source: string) => void,
): Promise<{ result: BackupResult; next: BackupResult; restored: string[]; last: string }> {
  const run = path.join(scratch, name);
  const source = path.join(run, 'source');
  mkdirSync(source, { recursive: true });
  writeFileSync(path.join(source, 'a-first.txt'), 'first');
  for (const [file, bytes] of Object.entries(middle)) writeFileSync(path.join(source, file), bytes);
  writeFileSync(path.join(source, 'd-last.txt'), 'last');
  const home = path.join(run, 'home');
  let changed = false;
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    afterFileRead: (relativePath) => {
      // Once: a pass that packs again reads a-first.txt again.
      if (relativePath === 'a-first.txt' && !changed) {
        changed = true;
        change(source);
      }
      return Promise.resolve();
    },
  });
  try {
    await engine.loginLocal({});
    await engine.createBucket({ name: 'Changed', type: 'backup', storageClass: 'hot' });
    const result = await engine.backup({ dir: source, bucket: 'Changed' });
    const target = path.join(run, 'restored');
    await engine.restore({ bucket: 'Changed', to: target, overwrite: false });
    return {
      result,
      next: await engine.backup({ dir: source, bucket: 'Changed' }),
      restored: readdirSync(target).sort(),
      last: readFileSync(path.join(target, 'd-last.txt'), 'utf8'),
    };
  } finally {
    await engine.close();
  }
}

describe('files that are deleted after the walk', () => {
  it('skips a file deleted before it was read, says so, and backs up the rest', async () => {
    const { result, next, restored, last } = await backUpChangedAfterWalk(
      'deleted-small',
      { 'b-gone.txt': 'gone' },
      (source) => rmSync(path.join(source, 'b-gone.txt')),
    );
    expect(result.skipped).toEqual([
      { path: 'b-gone.txt', reason: 'deleted before it was read', kind: 'changed' },
    ]);
    expect(result.files).toBe(2);
    expect(restored).toEqual(['a-first.txt', 'd-last.txt']);
    expect(last).toBe('last');
    // Gone for good: the next backup has nothing to report.
    expect(next.skipped).toEqual([]);
  });

  it('leaves out a large file deleted once read, and the version is whole without it', async () => {
    // Opened ahead of its turn, it may be read through a descriptor from before the deletion;
    // then its blocks, read again for the upload from a name gone by then, are not there, and
    // the backup packs again without it. Either way the version holds the rest, and only that.
    const { result, next, restored, last } = await backUpChangedAfterWalk(
      'deleted-large',
      { 'c-large.bin': randomBytes(3 * 1024 * 1024) },
      (source) => rmSync(path.join(source, 'c-large.bin')),
    );
    expect(result.files).toBe(2);
    expect(restored).toEqual(['a-first.txt', 'd-last.txt']);
    expect(last).toBe('last');
    expect(next.skipped).toEqual([]);
  });
});

describe('files that become something else after the walk', () => {
  // A named pipe opened the plain way would block the backup until a writer came: forever.
  it('skips a file that became a named pipe or a link, with a reason, and backs up the rest', async () => {
    const { result, next, restored, last } = await backUpChangedAfterWalk(
      'became',
      { 'b-pipe.txt': 'soon a pipe', 'c-link.txt': 'soon a link' },
      (source) => {
        rmSync(path.join(source, 'b-pipe.txt'));
        const made = spawnSync('mkfifo', [path.join(source, 'b-pipe.txt')]);
        if (made.status !== 0) throw new Error(`mkfifo failed: ${String(made.stderr)}`);
        rmSync(path.join(source, 'c-link.txt'));
        symlinkSync('a-first.txt', path.join(source, 'c-link.txt'));
      },
    );
    expect(result.skipped).toEqual([
      { path: 'b-pipe.txt', reason: 'it is now a named pipe, not a regular file', kind: 'changed' },
      {
        path: 'c-link.txt',
        reason: 'it is now a symbolic link, not a regular file',
        kind: 'changed',
      },
    ]);
    expect(result.files).toBe(2);
    expect(restored).toEqual(['a-first.txt', 'd-last.txt']);
    expect(last).toBe('last');
    // The next backup takes what they became: the link, and never the pipe.
    expect(next.skipped).toEqual([
      { path: 'b-pipe.txt', reason: 'named pipe (not backed up)', kind: 'special' },
    ]);
  });
});
