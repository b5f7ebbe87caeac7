import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EngineError } from '../../main/api/index.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { changeQuota } from '../../server/admin.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import { startTestService } from '../helpers/test-service.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';

// A backup over the storage quota is refused with a clear message and leaves nothing behind;
// once the quota allows it, the same backup goes through.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-quota-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('quota', () => {
  it('refuses a backup over quota clearly, then succeeds once the quota is raised', async () => {
    const service = await startTestService({ limits: DEFAULT_LIMITS });
    const home = path.join(scratch, 'home');
    const engine = createEngine({ home, secrets: new FileSecretStore(home) });
    try {
      const { code } = service.addUser('ann@example.org', 1_000_000);
      await engine.login({ server: service.url, code });
      await engine.createBucket({ name: 'Big', type: 'backup', storageClass: 'hot' });
      const source = path.join(scratch, 'source');
      mkdirSync(source);
      writeFileSync(path.join(source, 'large.bin'), randomBytes(2_000_000));
      const refused = engine.backup({ dir: source, bucket: 'Big' });
      await expect(refused).rejects.toBeInstanceOf(EngineError);
      await expect(refused).rejects.toMatchObject({
        code: 'quota_exceeded',
        message:
          'your storage quota is full: this backup adds 2.0 MB (2000000 bytes) the server does not hold yet; delete versions or buckets you no longer need, or ask for a larger quota',
      });
      expect(await engine.listVersions({ bucket: 'Big' })).toEqual([]);
      expect(stagedLeftovers(home)).toEqual([]);
      changeQuota(service.service.ctx, 'ann@example.org', 10_000_000);
      const done = await engine.backup({ dir: source, bucket: 'Big' });
      expect(done.newBytes).toBe(2_000_000);
    } finally {
      await engine.close();
      await service.close();
    }
  });
});

describe('quota and blocks the server holds already', () => {
  it('backs up files stored in another bucket near a full quota, counting only the bytes the server lacks', async () => {
    const service = await startTestService({ limits: DEFAULT_LIMITS });
    const home = path.join(scratch, 'held-home');
    /** Set to stop one backup once its upload is queued, as a crash there would. */
    let stopWhenQueued = false;
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      afterShardConfirmed: (confirmed) => {
        if (!stopWhenQueued || confirmed !== 0) return;
        stopWhenQueued = false;
        throw new Error('stopped once queued');
      },
    });
    try {
      const { code } = service.addUser('bo@example.org', 10_000_000);
      await engine.login({ server: service.url, code });
      const source = path.join(scratch, 'held-source');
      mkdirSync(source);
      const photo = randomBytes(2_000_000);
      writeFileSync(path.join(source, 'photo.raw'), photo);
      await engine.createBucket({ name: 'Photos', type: 'backup', storageClass: 'hot' });
      await engine.backup({ dir: source, bucket: 'Photos' });

      // Room for a good part of the files again, not for all of them: a second bucket of the
      // same folder stores no new block, and fits.
      changeQuota(service.service.ctx, 'bo@example.org', 3_000_000);
      await engine.createBucket({ name: 'Archive', type: 'backup', storageClass: 'hot' });
      // Stopped once its upload is queued, it leaves that version and the one that asked.
      stopWhenQueued = true;
      await expect(engine.backup({ dir: source, bucket: 'Archive' })).rejects.toThrow(
        'stopped once queued',
      );
      expect(
        (await engine.listVersions({ bucket: 'Archive' })).map((version) => version.state),
      ).toEqual(['pending', 'pending']);
      const archived = await engine.backup({ dir: source, bucket: 'Archive' });
      expect(archived).toMatchObject({ unchanged: true, bytesUploaded: 0 });
      expect(archived.resumedVersionId).toBe(archived.versionId);
      // The version that asked the server what it holds is gone: one version, active.
      const versions = await engine.listVersions({ bucket: 'Archive' });
      expect(versions.map((version) => version.state)).toEqual(['active']);
      const restored = path.join(scratch, 'held-restored');
      await engine.restore({ bucket: 'Archive', to: restored, overwrite: false });
      expect(readFileSync(path.join(restored, 'photo.raw')).equals(photo)).toBe(true);

      // Bytes the server lacks, beyond the quota's room, are refused as before, and leave
      // nothing pending.
      writeFileSync(path.join(source, 'video.raw'), randomBytes(2_000_000));
      await expect(engine.backup({ dir: source, bucket: 'Archive' })).rejects.toMatchObject({
        code: 'quota_exceeded',
        message: expect.stringMatching(
          /^your storage quota is full: this backup adds 2.0 MB \(2000000 bytes\) the server does not hold yet;/,
        ),
      });
      expect(
        (await engine.listVersions({ bucket: 'Archive' })).map((version) => version.state),
      ).toEqual(['active']);
      // A new bucket counts both files new; the server holds one, and the quota has no room
      // for the other either: refused all the same, saying what it would add.
      await engine.createBucket({ name: 'Third', type: 'backup', storageClass: 'hot' });
      await expect(engine.backup({ dir: source, bucket: 'Third' })).rejects.toMatchObject({
        code: 'quota_exceeded',
        message: expect.stringMatching(
          /^your storage quota is full: this backup adds 2.0 MB \(2000000 bytes\) the server does not hold yet;/,
        ),
      });
      expect(await engine.listVersions({ bucket: 'Third' })).toEqual([]);
      expect(stagedLeftovers(home)).toEqual([]);
    } finally {
      await engine.close();
      await service.close();
    }
  });
});
