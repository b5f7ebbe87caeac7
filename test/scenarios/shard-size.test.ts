import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type EngineDeps } from '../../main/index.ts';
import { openStateDatabase } from '../../main/state/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-shard-size-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Six 1 MiB files of fresh random bytes: 6 MiB the bucket does not hold. */
function writeNewContent(source: string): void {
  mkdirSync(source, { recursive: true });
  for (let i = 0; i < 6; i += 1)
    writeFileSync(path.join(source, `part-${i}.bin`), randomBytes(1 << 20));
}

/** An engine on `home` that counts the shards its backups upload, in `counted.shards`. */
function shardCountingEngine(home: string, deps: Pick<EngineDeps, 'startLocalService'> = {}) {
  const counted = { shards: 0 };
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    ...deps,
    afterShardConfirmed: (confirmedSoFar) => {
      if (confirmedSoFar > 0) counted.shards += 1;
    },
  });
  return { engine, counted };
}

describe('shard size', () => {
  it("sizes shards by the bucket's upload speed, or another bucket's before its own is known: a slow link gets shards of about a minute's upload", async () => {
    const home = path.join(scratch, 'home');
    const source = path.join(scratch, 'source');
    const { engine, counted } = shardCountingEngine(home, { startLocalService });
    // A second connection to the engine's state, as another process would see it.
    const state = openStateDatabase(path.join(home, 'state.sqlite'));
    const speed = (): number | undefined =>
      state
        .prepare<[], { bytes_per_second: number }>('SELECT bytes_per_second FROM upload_speeds')
        .get()?.bytes_per_second;
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Sized', type: 'backup', storageClass: 'hot' });

      // No speed known yet: 64 MiB shards, so the 6 MiB go in one; this machine's disk is fast.
      writeNewContent(source);
      await engine.backup({ dir: source, bucket: 'Sized' });
      expect(counted.shards).toBe(1);
      expect(speed()).toBeGreaterThan(1_000_000);

      // The link has been slow (50 kB/s): a minute's worth is under the 4 MiB floor, so the
      // next 6 MiB go as two shards of three 1 MiB blocks.
      state.prepare('UPDATE upload_speeds SET bytes_per_second = 50000').run();
      counted.shards = 0;
      writeNewContent(source);
      const result = await engine.backup({ dir: source, bucket: 'Sized' });
      expect(counted.shards).toBe(2);
      expect(result.bytesUploaded).toBeGreaterThan(6 * (1 << 20));
      // What this upload achieved is averaged in.
      expect(speed()).toBeGreaterThan(50_000);

      // A new bucket's first backup goes over the same link: it takes the speed measured last,
      // another bucket's, rather than 64 MiB shards.
      state.prepare('UPDATE upload_speeds SET bytes_per_second = 50000').run();
      await engine.createBucket({ name: 'Second', type: 'backup', storageClass: 'hot' });
      counted.shards = 0;
      const other = path.join(scratch, 'other-source');
      writeNewContent(other);
      await engine.backup({ dir: other, bucket: 'Second' });
      expect(counted.shards).toBe(2);
    } finally {
      state.close();
      await engine.close();
    }
  });

  it('steps its shards down behind a proxy that refuses large bodies, and starts there next time', async () => {
    const { service, proxy } = await startProxiedService();
    const home = path.join(scratch, 'proxied-home');
    const source = path.join(scratch, 'proxied-source');
    const { engine, counted } = shardCountingEngine(home);
    try {
      const { code } = service.addUser('ann@example.org');
      await engine.login({ server: proxy.url, code });
      await engine.createBucket({ name: 'Proxied', type: 'backup', storageClass: 'hot' });
      // Like nginx with client_max_body_size 2500k: the 6 MiB go as one shard, refused; then
      // as two of 3 MiB, sent at once and both refused; then as six of one leaf each, which pass.
      proxy.limitBodies(2_500_000);
      writeNewContent(source);
      await engine.backup({ dir: source, bucket: 'Proxied' });
      expect(proxy.injected()).toBe(3);
      expect(counted.shards).toBe(6);
      const versions = await engine.listVersions({ bucket: 'Proxied' });
      expect(versions.map((version) => version.state)).toEqual(['active']);
      const target = path.join(scratch, 'proxied-restored');
      await engine.restore({ bucket: 'Proxied', to: target, overwrite: false });
      for (const name of readdirSync(source))
        expect(
          readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
        ).toBe(true);

      // The next backup starts with shards the proxy takes: none is refused.
      counted.shards = 0;
      writeNewContent(source);
      await engine.backup({ dir: source, bucket: 'Proxied' });
      expect(proxy.injected()).toBe(3);
      expect(counted.shards).toBe(6);

      // Below one 1 MiB leaf, no shard can pass: the error says what to change, and the
      // backup leaves no version pending.
      proxy.limitBodies(1_000_000);
      writeNewContent(source);
      const failure = await engine.backup({ dir: source, bucket: 'Proxied' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toMatchObject({ code: 'payload_too_large' });
      expect((failure as Error).message).toMatch(
        /^a backup needs the server to take 1\.0 MB in one request, and it refused 1\.0 MB: too large for the server, or for a proxy in front of it \(HTTP 413\); if a proxy sits in front of the server, raise its request body limit \(for nginx: client_max_body_size\)$/,
      );
      expect(
        (await engine.listVersions({ bucket: 'Proxied' })).map((version) => version.state),
      ).toEqual(['active', 'outdated']);

      // A metadata CAR over the limit cannot be split: its push fails, naming the proxy.
      proxy.limitBodies(2_000);
      writeNewContent(source);
      await expect(engine.backup({ dir: source, bucket: 'Proxied' })).rejects.toMatchObject({
        code: 'payload_too_large',
        message:
          'too large for the server, or for a proxy in front of it (HTTP 413); if a proxy sits ' +
          'in front of the server, raise its request body limit (for nginx: client_max_body_size)',
      });
    } finally {
      await engine.close();
      await proxy.close();
      await service.close();
    }
  });
});
