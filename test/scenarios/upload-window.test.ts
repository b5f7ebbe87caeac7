import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { startTestService } from '../helpers/test-service.ts';

// A backup whose upload outlasts the server's upload window for its version (§10.2: 24 h by
// default; 3 s here) is told so, rather than as a device the server no longer accepts, and
// leaves neither a failed version nor a queued upload behind.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-window-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Holds this thread for `ms`, as a link too slow for the window would. */
function stall(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('the upload window', () => {
  it('a backup that outlasts it says so and what to do, and the next one that fits completes', async () => {
    const service = await startTestService({ limits: DEFAULT_LIMITS, uploadWindowMs: 3000 });
    const home = path.join(scratch, 'home');
    let slow = true;
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      shardTargetBytes: 1_500_000,
      afterShardConfirmed: (confirmed) => {
        if (slow && confirmed === 1) stall(3500);
      },
    });
    try {
      const source = path.join(scratch, 'source');
      for (let i = 0; i < 4; i += 1)
        writeSettled(path.join(source, `part-${i}.bin`), randomBytes(1 << 20));
      const { code } = service.addUser('ann@example.org');
      await engine.login({ server: service.url, code });
      await engine.createBucket({ name: 'Slow', type: 'backup', storageClass: 'hot' });

      await expect(engine.backup({ dir: source, bucket: 'Slow' })).rejects.toMatchObject({
        code: 'upload_window_over',
        message: expect.stringMatching(
          /^the server took this backup's data only within its 3 s upload window, which ended before all of it was sent; .* Back up less at once/,
        ),
      });
      expect(await engine.listVersions({ bucket: 'Slow' })).toEqual([]);

      slow = false;
      const next = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(next).toMatchObject({ resumedVersionId: null, newBytes: 4 << 20 });
      expect((await engine.listVersions({ bucket: 'Slow' })).map((v) => v.state)).toEqual([
        'active',
      ]);
    } finally {
      await engine.close();
      await service.close();
    }
  });
});
