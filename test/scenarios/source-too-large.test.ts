import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import { startTestService } from '../helpers/test-service.ts';

// A version's metadata CAR may be at most 128 MiB (§14), some 800 000 files. A larger source
// is refused with a message that says why and what to do: after the walk, before any file is
// read, when the least metadata its tree can make is already past the limit; or else as soon as
// packing passes it, rather than after reading every file. Nothing is stored, and the bucket's
// versions are as they were. The limit is lowered here: 800 000 files are too slow to make.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-too-large-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const aYearAgo = Date.now() - 365 * 86_400_000;

/**
 * A source of `folders` folders of `filesEach` small files each. Each file is dated a second
 * apart from the others, as a user's files are, unless `oneTime`: all at one second, and of one
 * size (other bytes), as files extracted together can be: the walk cannot tell their nodes apart.
 */
function makeSource(name: string, folders: number, filesEach: number, oneTime = false): string {
  const source = path.join(scratch, name);
  for (let folder = 0; folder < folders; folder++) {
    const dir = path.join(source, `folder-${folder}`);
    mkdirSync(dir, { recursive: true });
    for (let file = 0; file < filesEach; file++) {
      const at = path.join(dir, `file-${file}.txt`);
      const number = folder * filesEach + file;
      writeFileSync(
        at,
        oneTime ? String(number).padStart(13, '0') : `file ${file} of folder ${folder}`,
      );
      const seconds = oneTime ? 0 : number;
      const time = new Date(aYearAgo + seconds * 1000);
      utimesSync(at, time, time);
    }
  }
  return source;
}

/** An engine whose versions' metadata may be 64 KiB (about 400 small files' nodes). */
function limitedEngine(home: string, onFileRead: () => void) {
  return createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    metadataLimitBytes: 64 * 1024,
    afterFileRead: () => {
      onFileRead();
      return Promise.resolve();
    },
  });
}

/** Why a backup of `source` is refused: as its dry run tells it, and the backup's own error. */
function reason(source: string): string {
  return `${source} holds too many files and folders for one backup: the list of their names, sizes and times is more than 65536 bytes, the most one version can hold (roughly 400 files); back up some of its subfolders to buckets of their own, or exclude some in a .canopyignore file`;
}

function refusal(source: string): { code: string; message: string } {
  return { code: 'source_too_large', message: `${reason(source)}. Nothing was stored` };
}

describe('a source too large for one version', () => {
  it('is refused after the walk, before a file is read, and a smaller one goes through', async () => {
    const home = path.join(scratch, 'home');
    let filesRead = 0;
    const engine = limitedEngine(home, () => (filesRead += 1));
    try {
      const source = makeSource('source', 2, 20);
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Home', type: 'backup', storageClass: 'hot' });
      const first = await engine.backup({ dir: source, bucket: 'Home' });
      expect(first.files).toBe(40);

      // 1 200 more files: their nodes take some 190 KB.
      makeSource('source', 32, 40);
      filesRead = 0;
      await expect(engine.backup({ dir: source, bucket: 'Home' })).rejects.toMatchObject(
        refusal(source),
      );
      expect(filesRead).toBe(0);
      // So does its dry run.
      const plan = await engine.planBackup({ dir: source, bucket: 'Home' });
      expect(plan.refusedBecause).toBe(reason(source));
      expect(plan.toRead).toBeNull();
      expect(stagedLeftovers(home)).toEqual([]);
      const versions = await engine.listVersions({ bucket: 'Home' });
      expect(versions.map((version) => [version.id, version.state])).toEqual([
        [first.versionId, 'active'],
      ]);
      expect((await engine.ls({ bucket: 'Home' })).map((entry) => entry.name)).toEqual([
        'folder-0',
        'folder-1',
      ]);

      // Excluding most folders, as the message says, makes it fit: folder-0 and folder-4 to
      // folder-9 are left, and the .canopyignore file.
      writeFileSync(path.join(source, '.canopyignore'), 'folder-1*\nfolder-2*\nfolder-3*\n');
      expect((await engine.planBackup({ dir: source, bucket: 'Home' })).refusedBecause).toBeNull();
      const smaller = await engine.backup({ dir: source, bucket: 'Home' });
      expect(smaller.files).toBe(7 * 40 + 1);
      expect((await engine.ls({ bucket: 'Home', path: 'folder-9' })).length).toBe(40);
    } finally {
      await engine.close();
    }
  });

  it('is refused once packing passes the limit, when the walk cannot tell its files apart', async () => {
    const home = path.join(scratch, 'home-one-time');
    let filesRead = 0;
    const engine = limitedEngine(home, () => (filesRead += 1));
    try {
      // 800 files of one size and time: to the walk, one file's node in 800 links (some 43 KB).
      const source = makeSource('source-one-time', 20, 40, true);
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Home', type: 'backup', storageClass: 'hot' });
      expect((await engine.planBackup({ dir: source, bucket: 'Home' })).refusedBecause).toBeNull();
      await expect(engine.backup({ dir: source, bucket: 'Home' })).rejects.toMatchObject(
        refusal(source),
      );
      // Packing stopped at the limit: many files were never read.
      expect(filesRead).toBeGreaterThan(0);
      expect(filesRead).toBeLessThan(700);
      expect(stagedLeftovers(home)).toEqual([]);
      expect(await engine.listVersions({ bucket: 'Home' })).toEqual([]);
    } finally {
      await engine.close();
    }
  });

  it('is told as such when the service refuses the metadata with a lower limit of its own', async () => {
    // The test service takes metadata CARs of at most 256 KiB; the client plans by 128 MiB.
    const service = await startTestService();
    const home = path.join(scratch, 'home-service');
    const engine = createEngine({ home, secrets: new FileSecretStore(home) });
    try {
      const { code } = service.addUser('ann@example.org');
      await engine.login({ server: service.url, code });
      await engine.createBucket({ name: 'Big', type: 'backup', storageClass: 'hot' });
      const source = makeSource('source-service', 30, 100);
      const refused = engine.backup({ dir: source, bucket: 'Big' });
      await expect(refused).rejects.toMatchObject({
        code: 'source_too_large',
        message: `${source} holds too many files and folders for one backup: the list of their names, sizes and times is more than the server takes for one version; back up some of its subfolders to buckets of their own, or exclude some in a .canopyignore file. Nothing was stored`,
      });
      expect(await engine.listVersions({ bucket: 'Big' })).toEqual([]);
      expect(stagedLeftovers(home)).toEqual([]);
    } finally {
      await engine.close();
      await service.close();
    }
  });
});
