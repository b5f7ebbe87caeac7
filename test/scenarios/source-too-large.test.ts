import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import { startTestService } from '../helpers/test-service.ts';

// A version's metadata CAR may be at most 128 MiB (§14), some 800 000 files. A larger source
// is refused with a message that says why and what to do, as soon as packing passes the limit
// rather than after reading every file; nothing is stored, and the bucket's versions are as
// they were. The limit is lowered here: 800 000 files are too slow to make in a test.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-too-large-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A source of `folders` folders of `filesEach` small files each. */
function makeSource(name: string, folders: number, filesEach: number): string {
  const source = path.join(scratch, name);
  for (let folder = 0; folder < folders; folder++) {
    const dir = path.join(source, `folder-${folder}`);
    mkdirSync(dir, { recursive: true });
    for (let file = 0; file < filesEach; file++)
      writeFileSync(path.join(dir, `file-${file}.txt`), `file ${file} of folder ${folder}`);
  }
  return source;
}

describe('a source too large for one version', () => {
  it('is refused once packing passes the limit, and a smaller one goes through', async () => {
    const home = path.join(scratch, 'home');
    let filesRead = 0;
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      startLocalService,
      // About 400 small files' worth of nodes.
      metadataLimitBytes: 64 * 1024,
      afterFileRead: () => {
        filesRead += 1;
        return Promise.resolve();
      },
    });
    try {
      const source = makeSource('source', 2, 20);
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Home', type: 'backup', storageClass: 'hot' });
      const first = await engine.backup({ dir: source, bucket: 'Home' });
      expect(first.files).toBe(40);

      // 1 200 more files: their nodes take some 190 KB.
      makeSource('source', 32, 40);
      filesRead = 0;
      const refused = engine.backup({ dir: source, bucket: 'Home' });
      await expect(refused).rejects.toMatchObject({
        code: 'source_too_large',
        message: `${source} holds too many files and folders for one backup: the list of their names, sizes and times is more than 65536 bytes, the most one version can hold (roughly 400 files); back up some of its subfolders to buckets of their own, or exclude some in a .canopyignore file. Nothing was stored`,
      });
      // Packing stopped at the limit: most new files were never read.
      expect(filesRead).toBeGreaterThan(0);
      expect(filesRead).toBeLessThan(700);
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
      const smaller = await engine.backup({ dir: source, bucket: 'Home' });
      expect(smaller.files).toBe(7 * 40 + 1);
      expect((await engine.ls({ bucket: 'Home', path: 'folder-9' })).length).toBe(40);
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
