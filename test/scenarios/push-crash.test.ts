import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { runHelper, type HelperProcess } from '../helpers/helper-process.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { startTestService } from '../helpers/test-service.ts';

// A device killed right after the service made its pushed version pending, before it recorded
// the upload: the service holds a pending version no queued upload refers to, which would count
// toward the quota all it expects until its window ends (24 h by default), and shows in the
// bucket's versions meanwhile. The next backup deletes it, and completes.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-push-crash-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a device killed between its push and recording the upload', () => {
  it('leaves a pending version the next backup deletes before it completes its own', async () => {
    const source = path.join(scratch, 'source');
    for (let i = 0; i < 3; i += 1)
      writeSettled(path.join(source, `part-${i}.bin`), randomBytes((1 << 20) + i));
    const device: { helper?: HelperProcess } = {};
    let killed = false;
    const service = await startTestService({ limits: DEFAULT_LIMITS }, (app) => {
      app.addHook('onRequest', async (request) => {
        // The push was answered; the device asks which blocks the service lacks, then records
        // the upload. It is gone before that answer.
        if (killed || !device.helper || !request.url.includes('/blocks/missing')) return;
        killed = true;
        device.helper.child.kill('SIGKILL');
        await device.helper.exited;
        throw new Error('the device went away');
      });
    });
    const home = path.join(scratch, 'home');
    const engine = createEngine({ home, secrets: new FileSecretStore(home) });
    try {
      const { code } = service.addUser('ann@example.org');
      await engine.login({ server: service.url, code });
      await engine.createBucket({ name: 'Pushed', type: 'backup', storageClass: 'hot' });
      await engine.close();

      const helper = runHelper('stalled-backup', [home, source, 'Pushed', '0']);
      device.helper = helper;
      if ((await helper.exited).signal !== 'SIGKILL')
        throw new Error(`the device was not killed:\n${helper.output()}`);
      const states = (): string[] => service.versionStates();
      expect(states()).toEqual(['pending']);

      const again = createEngine({ home, secrets: new FileSecretStore(home) });
      try {
        const result = await again.backup({ dir: source, bucket: 'Pushed' });
        expect(states()).toEqual(['deleted', 'active']);
        expect((await again.listVersions({ bucket: 'Pushed' })).map((v) => v.id)).toEqual([
          result.versionId,
        ]);
        const target = path.join(scratch, 'restored');
        await again.restore({ bucket: 'Pushed', to: target, overwrite: false });
        for (let i = 0; i < 3; i += 1)
          expect(
            readFileSync(path.join(target, `part-${i}.bin`)).equals(
              readFileSync(path.join(source, `part-${i}.bin`)),
            ),
          ).toBe(true);
      } finally {
        await again.close();
      }
    } finally {
      await service.close();
    }
  });
});
