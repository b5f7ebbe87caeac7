import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
        message: 'your storage quota is full',
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
