import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine, type EngineDeps, type ServiceWait } from '../../main/index.ts';
import type { FaultProxy } from '../helpers/fault-proxy.ts';
import { seededBytes } from '../helpers/seeded-random.ts';
import type { TestService } from '../helpers/test-service.ts';
import { fingerprintTree } from '../helpers/tree-fingerprint.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';

// A service that goes away while a backup, a restore or a verify is under way (restarted, or
// the link to it down) for longer than the retry policy's attempts: the operation waits for it,
// says once that it waits and once that it reached it again, and ends as it would have. One
// down for longer than the outage budget fails with the network's error, and the next run
// finishes the job; one that cannot be reached from the start is told at once, with no wait.
// Here the proxy in front of the service resets every connection while the service is "down".

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-outage-'));
let service: TestService;
let proxy: FaultProxy;
/** What the tests' engines told of their waits, in order. */
let waits: string[] = [];
/** Runs once the backup confirmed its first shard; tests set it. */
let afterFirstShard: (() => void) | undefined;
const A_YEAR_AGO = new Date(Date.now() - 365 * 86_400_000);

beforeAll(async () => {
  // Shard uploads go through the proxy too, and see the outage.
  ({ service, proxy } = await startProxiedService());
});
afterAll(async () => {
  await proxy.close();
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** The service "down": every request's connection reset, for `ms` if given. */
function goDown(ms?: number): void {
  proxy.faultEach(() => 'reset');
  if (ms !== undefined) setTimeout(() => proxy.faultEach(undefined), ms);
}

function told(wait: ServiceWait): void {
  waits.push(wait.state === 'waiting' ? `waiting: ${wait.error.code}` : 'reached');
}

/** An engine of its own home, logged in through the proxy, with a bucket `Outage`. */
async function engineWith(name: string, deps: Partial<EngineDeps>): Promise<Engine> {
  const home = path.join(scratch, name, 'home');
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    // Three quick attempts: the retry policy alone gives up within a few tenths of a second.
    retry: { attempts: 3, baseDelayMs: 10, maxDelayMs: 100 },
    shardTargetBytes: 400_000,
    afterShardConfirmed: (confirmed) => {
      if (confirmed !== 1) return;
      afterFirstShard?.();
      afterFirstShard = undefined;
    },
    ...deps,
  });
  const { code } = service.addUser(`${name}@example.org`);
  await engine.login({ server: proxy.url, code });
  await engine.createBucket({ name: 'Outage', type: 'backup', storageClass: 'hot' });
  return engine;
}

/**
 * Runs `use` with engineWith's engine, told waits from none, and the service up again after,
 * whatever `use` left down.
 */
async function withEngine(
  name: string,
  deps: Partial<EngineDeps>,
  use: (engine: Engine) => Promise<void>,
): Promise<void> {
  waits = [];
  const engine = await engineWith(name, deps);
  try {
    await use(engine);
  } finally {
    proxy.faultEach(undefined);
    await engine.close();
  }
}

/** A folder of eight files of 300 kB: several shards. */
function sourceNamed(name: string): string {
  const source = path.join(scratch, name, 'source');
  mkdirSync(source, { recursive: true });
  for (let i = 0; i < 8; i += 1) {
    const file = path.join(source, `${i}.bin`);
    writeFileSync(file, seededBytes(i, 300_000));
    utimesSync(file, A_YEAR_AGO, A_YEAR_AGO);
  }
  return source;
}

describe('a service that goes away part way', () => {
  it('is waited for by a backup, then a restore and a verify, each saying so once', async () => {
    await withEngine('waited', { outageBudgetMs: 30_000 }, async (engine) => {
      const source = sourceNamed('waited');
      afterFirstShard = () => goDown(1500);
      const stored = await engine.backup({ dir: source, bucket: 'Outage', onServiceWait: told });
      expect(afterFirstShard).toBeUndefined();
      expect(stored.files).toBe(8);
      expect(waits).toEqual(['waiting: network', 'reached']);

      waits = [];
      // Down from the first request for blocks on, once the restore found its version.
      const downAtBlocks = (): void =>
        proxy.faultEach((method, url) => {
          if (!url.endsWith('/blocks/car')) return 'pass';
          goDown(1500);
          return 'reset';
        });
      downAtBlocks();
      const target = path.join(scratch, 'waited', 'restored');
      await engine.restore({
        bucket: 'Outage',
        to: target,
        overwrite: false,
        onServiceWait: told,
      });
      expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
      expect(waits).toEqual(['waiting: network', 'reached']);

      waits = [];
      downAtBlocks();
      const verified = await engine.verify({ bucket: 'Outage', all: true, onServiceWait: told });
      expect(verified.checked).toBe(verified.total);
      expect(waits).toEqual(['waiting: network', 'reached']);
    });
  });

  it('fails a backup once down past the budget, and the next backup finishes its upload', async () => {
    await withEngine('gone', { outageBudgetMs: 1000 }, async (engine) => {
      const source = sourceNamed('gone');
      afterFirstShard = () => goDown();
      await expect(
        engine.backup({ dir: source, bucket: 'Outage', onServiceWait: told }),
      ).rejects.toMatchObject({ code: 'network' });
      // Told that it waited, never that it reached the service again.
      expect(waits).toEqual(['waiting: network']);

      proxy.faultEach(undefined);
      const resumed = await engine.backup({ dir: source, bucket: 'Outage' });
      // The upload it left, with its confirmed shard, finished rather than begun again.
      expect(resumed.resumedVersionId).toBe(resumed.versionId);
      expect(resumed.files).toBe(8);
      const target = path.join(scratch, 'gone', 'restored');
      await engine.restore({ bucket: 'Outage', to: target, overwrite: false });
      expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
    });
  });

  it('is not waited for by the sample check of a backup that is stored', async () => {
    await withEngine('checked', { outageBudgetMs: 120_000 }, async (engine) => {
      const source = sourceNamed('checked');
      // Every request for blocks fails: only the check after the backup asks for any.
      proxy.faultEach((method, url) => (url.endsWith('/blocks/car') ? 'reset' : 'pass'));
      const stored = await engine.backup({
        dir: source,
        bucket: 'Outage',
        checkBlocks: 8,
        onServiceWait: told,
      });
      expect(stored.files).toBe(8);
      expect(stored.sampleCheck).toMatchObject({ failed: expect.stringMatching(/cannot reach/) });
      expect(waits).toEqual([]);
    });
  });

  it("is not waited for by a restore's dry run, which is told at once", async () => {
    await withEngine('planned', { outageBudgetMs: 120_000 }, async (engine) => {
      const source = sourceNamed('planned');
      const { versionId } = await engine.backup({ dir: source, bucket: 'Outage' });
      // No copy of the version's list of files here: the dry run fetches it, once it found the
      // version, and that fetch fails.
      rmSync(path.join(scratch, 'planned', 'home', 'metadata', `${versionId}.car`));
      proxy.faultEach((method, url) => (url.endsWith('/pull') ? 'reset' : 'pass'));
      await expect(
        engine.planRestore({
          bucket: 'Outage',
          to: path.join(scratch, 'planned', 'restored'),
          overwrite: false,
        }),
      ).rejects.toMatchObject({ code: 'network' });
    });
  });

  it('is not waited for when the operation never reached it', async () => {
    await withEngine('never', { outageBudgetMs: 120_000 }, async (engine) => {
      const source = sourceNamed('never');
      // Down for all but the list of buckets, which the backup looks up before it begins.
      const failed: string[] = [];
      proxy.faultEach((method, url) => {
        if (method === 'GET' && url === '/api/v1/buckets') return 'pass';
        failed.push(`${method} ${url.replace(/\?.*/, '')}`);
        return 'reset';
      });
      await expect(
        engine.backup({ dir: source, bucket: 'Outage', onServiceWait: told }),
      ).rejects.toMatchObject({ code: 'network' });
      expect(waits).toEqual([]);
      // Its first request to the service, tried the policy's three times, and no more.
      expect(failed).toHaveLength(3);
      expect(new Set(failed).size).toBe(1);
    });
  });
});
