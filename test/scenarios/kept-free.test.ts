import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { DEFAULT_LIMITS, OUT_OF_SPACE_MSG } from '../../main/protocol/index.ts';
import { mountMemoryDisk } from '../helpers/limited-disks.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { startTestService } from '../helpers/test-service.ts';

// The service leaves room free on the disk of its data: a backup to a disk that also holds the
// user's own files (this computer) stops short of filling it, so the user's other programs can
// still save theirs. Here the room is half of a 64 MiB disk, for a backup of 48 MiB.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-kept-free-'));
const disk = mountMemoryDisk(path.join(scratch, 'disk'), 'tmpfs', 64);
afterAll(() => {
  disk.unmount();
  rmSync(scratch, { recursive: true, force: true });
});

const MiB = 1 << 20;
const freeBytes = (): number => {
  const stats = statfsSync(disk.dir);
  return stats.bavail * stats.bsize;
};

describe('the room kept free on the backup disk', () => {
  it('stops a backup before it fills the disk, saying so, and the backup finishes once there is room', async () => {
    const service = await startTestService({
      dataDir: disk.dir,
      limits: DEFAULT_LIMITS,
      keptFree: { fraction: 0.5, maxBytes: 1 << 30 },
    });
    const home = path.join(scratch, 'home');
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      shardTargetBytes: 4 * MiB,
    });
    try {
      const { code } = service.addUser('ann@example.org');
      await engine.login({ server: service.url, code });
      await engine.createBucket({ name: 'Big', type: 'backup', storageClass: 'hot' });
      const source = path.join(scratch, 'source');
      for (let i = 0; i < 12; i += 1)
        writeSettled(path.join(source, `part-${i}.bin`), randomBytes(4 * MiB));

      await expect(engine.backup({ dir: source, bucket: 'Big' })).rejects.toMatchObject({
        code: 'server_error',
        message: expect.stringContaining(OUT_OF_SPACE_MSG),
      });
      // Stopped short of the room: half the disk is still free.
      expect(freeBytes()).toBeGreaterThanOrEqual(32 * MiB);

      // A larger disk (as after clearing some of it): the upload goes on from where it was.
      const grown = spawnSync('mount', ['-o', 'remount,size=160m', disk.dir], { encoding: 'utf8' });
      expect(grown.status, grown.stderr).toBe(0);
      const done = await engine.backup({ dir: source, bucket: 'Big' });
      expect(done.resumedVersionId).toBe(done.versionId);
      expect(freeBytes()).toBeGreaterThanOrEqual(80 * MiB);
      const target = path.join(scratch, 'restored');
      await engine.restore({ bucket: 'Big', to: target, overwrite: false });
      for (let i = 0; i < 12; i += 1)
        expect(
          readFileSync(path.join(target, `part-${i}.bin`)).equals(
            readFileSync(path.join(source, `part-${i}.bin`)),
          ),
        ).toBe(true);
    } finally {
      await engine.close();
      await service.close();
    }
  });
});
