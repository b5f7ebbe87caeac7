import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { runHelper, type HelperProcess } from '../helpers/helper-process.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { startTestService } from '../helpers/test-service.ts';

// Near a full quota, an upload nearing its window's end goes on through a bridge version: one
// pushed expecting a single byte, which claims what the old version received, then the old one
// deleted, then the version that takes the upload over pushed. A device killed between those
// steps leaves versions pending that nothing queued refers to; the next backup completes all
// the same, leaves none of them behind, and the folder restores as it is.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-bridge-crash-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Where the device is killed: as it asks to delete the old version, or to push the new one. */
type KillPoint = 'old version deleted' | 'new version pushed';

async function killedInBridge(point: KillPoint) {
  const run = path.join(scratch, point.replaceAll(' ', '-'));
  const source = path.join(run, 'source');
  for (let i = 0; i < 4; i += 1)
    writeSettled(path.join(source, `part-${i}.bin`), randomBytes(1 << 20));
  /** The device's process, once started. */
  const device: { helper?: HelperProcess } = {};
  let deleteAsked = false;
  let killed = false;
  /** The shard bytes the service was sent: by the device killed, then by the next backup. */
  const shardBytes = { killed: 0, next: 0 };
  const service = await startTestService(
    { limits: DEFAULT_LIMITS, uploadWindowMs: 8000 },
    (app) => {
      app.addHook('onRequest', async (request) => {
        const url = request.url.split('?')[0] ?? '';
        if (request.method === 'PUT' && url.includes('/upload/'))
          shardBytes[killed ? 'next' : 'killed'] += Number(request.headers['content-length']);
        if (killed || !device.helper) return;
        const deletes = request.method === 'DELETE' && url.includes('/buckets/metadata/');
        const pushes = request.method === 'POST' && url.endsWith('/buckets/metadata');
        const at = point === 'old version deleted' ? deletes : pushes && deleteAsked;
        if (deletes) deleteAsked = true;
        if (!at) return;
        // Before the service acts on the request: the device is gone, and so is its answer.
        killed = true;
        device.helper.child.kill('SIGKILL');
        await device.helper.exited;
        throw new Error('the device went away');
      });
    },
  );
  // Room for the four files once, not for a new version expecting them all beside what the
  // one left pending has yet to receive: going on takes a bridge.
  const { code } = service.addUser('ann@example.org', (4 << 20) + (1 << 20));
  const home = path.join(run, 'home');
  const setup = createEngine({ home, secrets: new FileSecretStore(home) });
  await setup.login({ server: service.url, code });
  await setup.createBucket({ name: 'Slow', type: 'backup', storageClass: 'hot' });
  await setup.close();

  const helper = runHelper('stalled-backup', [home, source, 'Slow', '6000']);
  device.helper = helper;
  if ((await helper.exited).signal !== 'SIGKILL')
    throw new Error(`the device was not killed ${point}:\n${helper.output()}`);
  return { run, source, home, service, shardBytes };
}

describe('a device killed while going on through a bridge version', () => {
  it.each<{ point: KillPoint; atKill: string[] }>([
    { point: 'old version deleted', atKill: ['pending', 'pending'] },
    { point: 'new version pushed', atKill: ['deleted', 'pending'] },
  ])(
    'as the $point, the next backup completes and leaves no version pending',
    async ({ point, atKill }) => {
      const { run, source, home, service, shardBytes } = await killedInBridge(point);
      const states = (): string[] => service.versionStates();
      const engine = createEngine({ home, secrets: new FileSecretStore(home) });
      try {
        // The version left pending, and the bridge that claimed what it received.
        expect(states()).toEqual(atKill);
        const next = await engine.backup({ dir: source, bucket: 'Slow' });
        const after = states();
        expect(after.at(-1)).toBe('active');
        expect(after.slice(0, -1).every((state) => state === 'deleted')).toBe(true);
        // What the killed device sent is not sent again (each shard a MiB of data and a CAR
        // header), and the backup says what it sent.
        expect(shardBytes.killed).toBeGreaterThanOrEqual(1 << 20);
        expect(shardBytes.killed + shardBytes.next).toBeGreaterThan(4 << 20);
        expect(shardBytes.killed + shardBytes.next).toBeLessThan((4 << 20) + 1024);
        expect(next.bytesUploaded).toBe(shardBytes.next);
        expect(
          (await engine.listVersions({ bucket: 'Slow' })).map((version) => version.id),
        ).toEqual([next.versionId]);
        expect(readdirSync(path.join(home, 'staging'))).toEqual([]);
        const target = path.join(run, 'restored');
        await engine.restore({ bucket: 'Slow', to: target, overwrite: false });
        for (const name of readdirSync(source))
          expect(
            readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
          ).toBe(true);
      } finally {
        await engine.close();
        await service.close();
      }
    },
  );
});
