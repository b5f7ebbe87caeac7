import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { formatBytes } from '../../main/api/index.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { fingerprintTree } from '../helpers/tree-fingerprint.ts';
import type { Fault, FaultProxy } from '../helpers/fault-proxy.ts';
import type { TestService } from '../helpers/test-service.ts';
import { changeQuota, newEnrollmentCode } from '../../server/admin.ts';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { usageOf } from '../../server/store/accounting.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';

// A backup and a restore through a proxy that fails a seeded 10 % of requests with 500, 503,
// 429 or a reset: both complete, and the restore is identical. A restore and a verify also
// survive blocks/car answers that break off part-way, and a link that drops every long answer;
// a restore stops cleanly when answers keep breaking off before a block comes, and names the files it wrote while an answer stalls. A backup whose push and
// completion answers are lost still completes, and leaves no version pending.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-faults-'));
let service: TestService;
let proxy: FaultProxy;
let engine: Engine;
let annId: string;

beforeAll(async () => {
  // Shard uploads go through the proxy too, and see its faults.
  ({ service, proxy } = await startProxiedService());
  const home = path.join(scratch, 'home');
  engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    retry: RETRY,
    shardTargetBytes: 1_500_000,
  });
  const { code, userId } = service.addUser('ann@example.org');
  annId = userId;
  await engine.login({ server: proxy.url, code });
  await engine.createBucket({ name: 'Faulty', type: 'backup', storageClass: 'hot' });
});
afterAll(async () => {
  await engine.close();
  await proxy.close();
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** The engine's retry policy: each request, and each batch of blocks whose answers break off. */
const RETRY = { attempts: 8, baseDelayMs: 10, maxDelayMs: 200 };

/** blocks/car answers that break off part-way, as many as a batch of blocks is asked for. */
function cutAsOftenAsTried(): Fault[] {
  return Array<Fault>(RETRY.attempts).fill('cut');
}

/** The bucket lists one version, `versionId`, active: no version was left pending. */
async function expectOnlyActive(owner: Engine, bucket: string, versionId: string): Promise<void> {
  const versions = await owner.listVersions({ bucket });
  expect(versions.map((version) => [version.id, version.state])).toEqual([[versionId, 'active']]);
}

describe('backup through a faulty network', () => {
  it('completes and restores identically with 10 % of requests failing', async () => {
    const source = path.join(scratch, 'source');
    mkdirSync(path.join(source, 'nested'), { recursive: true });
    for (let i = 0; i < 5; i += 1)
      writeFileSync(path.join(source, 'nested', `file-${i}.bin`), randomBytes(700_000 + i));
    writeFileSync(path.join(source, 'small.txt'), 'small');
    proxy.randomFaults(0.1, 7);
    const result = await engine.backup({ dir: source, bucket: 'Faulty' });
    expect(result.files).toBe(6);
    const target = path.join(scratch, 'restored');
    await engine.restore({ bucket: 'Faulty', to: target, overwrite: false });
    for (let i = 0; i < 5; i += 1) {
      const name = path.join('nested', `file-${i}.bin`);
      expect(
        readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
      ).toBe(true);
    }
    expect(readFileSync(path.join(target, 'small.txt'), 'utf8')).toBe('small');
    expect(proxy.injected()).toBeGreaterThan(0);
  });

  it('restores identically when blocks/car answers are cut off part-way', async () => {
    const source = path.join(scratch, 'source');
    proxy.randomFaults(0, 1);
    const before = proxy.injected();
    // Two answers in a row hang up after their first bytes; the rest of each batch is asked for
    // again.
    proxy.schedule(['cut', 'cut'], /\/blocks\/car$/);
    const target = path.join(scratch, 'restored-after-cuts');
    await engine.restore({ bucket: 'Faulty', to: target, overwrite: false });
    expect(proxy.injected() - before).toBe(2);
    for (let i = 0; i < 5; i += 1) {
      const name = path.join('nested', `file-${i}.bin`);
      expect(
        readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
      ).toBe(true);
    }
  });

  it('restores and verifies through a link that drops every answer after a few hundred kB', async () => {
    proxy.randomFaults(0, 1);
    const source = path.join(scratch, 'source-many');
    mkdirSync(source);
    for (let i = 0; i < 20; i += 1)
      writeFileSync(path.join(source, `part-${i}.bin`), randomBytes(200_000 + i));
    await engine.createBucket({ name: 'Dropping', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: source, bucket: 'Dropping' });
    // Each answer brings a block and part of the next: twenty answers for the one batch, far
    // more than the eight tries a request has.
    proxy.faultEach((_, url) =>
      url.endsWith('/blocks/car') ? { cutAfterBytes: 300_000 } : 'pass',
    );
    try {
      const asked = (): number =>
        proxy.seen.filter((request) => request.path.endsWith('/blocks/car')).length;
      const before = asked();
      const target = path.join(scratch, 'restored-dropping');
      await engine.restore({ bucket: 'Dropping', to: target, overwrite: false });
      expect(asked() - before).toBeGreaterThan(RETRY.attempts);
      expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
      expect(await engine.verify({ bucket: 'Dropping', all: true })).toMatchObject({
        checked: 20,
        unavailable: [],
      });
    } finally {
      proxy.faultEach(undefined);
    }
  });

  it('gives restored files their names as it goes when the link stalls, not only at the end', async () => {
    proxy.randomFaults(0, 1);
    await engine.createBucket({ name: 'Stalling', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'source-stalling');
    mkdirSync(source);
    // Ten leaves of 1 MiB: a first batch of eight, then two more.
    const photos = Array.from({ length: 10 }, () => randomBytes(1 << 20));
    photos.forEach((bytes, index) => writeFileSync(path.join(source, `p${index}.jpg`), bytes));
    await engine.backup({ dir: source, bucket: 'Stalling' });
    // The second batch's answer comes only after 3 s, as over a link that stalls.
    proxy.schedule(['pass', { delayMs: 3000 }], /\/blocks\/car$/);
    const target = path.join(scratch, 'restored-stalling');
    let done = false;
    const restoring = engine
      .restore({ bucket: 'Stalling', to: target, overwrite: false })
      .finally(() => {
        done = true;
      });
    let namedWhileRunning = false;
    while (!done && !namedWhileRunning) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      namedWhileRunning = !done && existsSync(path.join(target, 'p0.jpg'));
    }
    await restoring;
    expect(namedWhileRunning).toBe(true);
    photos.forEach((bytes, index) =>
      expect(readFileSync(path.join(target, `p${index}.jpg`)).equals(bytes)).toBe(true),
    );
  });

  it('verifies every block when blocks/car answers break off part-way', async () => {
    proxy.randomFaults(0, 1);
    const before = proxy.injected();
    proxy.schedule(['cut', 'cut'], /\/blocks\/car$/);
    const verified = await engine.verify({ bucket: 'Faulty', all: true });
    expect(proxy.injected() - before).toBe(2);
    expect(verified.total).toBe(6);
    expect(verified.checked).toBe(6);
    expect(verified.bytes).toBe(5 * 700_000 + 10 + 'small'.length);
  });

  it('restores a file whose block came back damaged once, fetched again whole, and says so', async () => {
    proxy.randomFaults(0, 1);
    await engine.createBucket({ name: 'Flipped', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'source-flipped');
    mkdirSync(source);
    // Two leaves of 1 MiB and one of 100 KiB: large enough to be checked as it is written.
    const big = randomBytes(2 * (1 << 20) + 100 * 1024);
    const small = randomBytes(3000);
    writeFileSync(path.join(source, 'big.bin'), big);
    writeFileSync(path.join(source, 'small.txt'), small);
    await engine.backup({ dir: source, bucket: 'Flipped' });
    const before = proxy.injected();
    // The answer's last byte is the last leaf's: big.bin's tail, then small.txt's only leaf.
    for (const [name, bytes] of [
      ['big.bin', big],
      ['small.txt', small],
    ] as const) {
      proxy.schedule(['damage'], /\/blocks\/car$/);
      const target = path.join(scratch, `restored-flipped-${name}`);
      const result = await engine.restore({
        bucket: 'Flipped',
        path: name,
        to: target,
        overwrite: false,
      });
      expect(result.notRestored).toEqual([]);
      expect(result.wholeOnRetry).toHaveLength(1);
      expect(readdirSync(target)).toEqual([name]);
      expect(readFileSync(path.join(target, name)).equals(bytes)).toBe(true);
    }
    expect(proxy.injected() - before).toBe(2);
  });

  it('leaves out, and names, a file whose block comes back damaged twice', async () => {
    proxy.randomFaults(0, 1);
    proxy.schedule(['damage', 'damage'], /\/blocks\/car$/);
    const target = path.join(scratch, 'restored-flipped-twice');
    const result = await engine.restore({
      bucket: 'Flipped',
      path: 'big.bin',
      to: target,
      overwrite: false,
    });
    expect(result.notRestored).toEqual([
      { path: 'big.bin', reason: expect.stringMatching(/came back from the server damaged$/) },
    ]);
    expect(result.wholeOnRetry).toEqual([]);
    // Neither its temporary file nor a part of it is left.
    expect(readdirSync(target)).toEqual([]);
  });

  it('verifies a version whose block came back damaged once, and says so', async () => {
    proxy.randomFaults(0, 1);
    proxy.schedule(['damage'], /\/blocks\/car$/);
    const verified = await engine.verify({ bucket: 'Faulty', all: true });
    expect(verified.unavailable).toEqual([]);
    expect(verified.unrestorable).toEqual([]);
    expect(verified.wholeOnRetry).toHaveLength(1);
    expect(verified.checked).toBe(6);
    expect(verified.bytes).toBe(5 * 700_000 + 10 + 'small'.length);
  });

  it('tells the user of `canopy verify` that a block came back damaged once', async () => {
    proxy.randomFaults(0, 1);
    const home = path.join(scratch, 'cli-home');
    const env = { CANOPY_SECRET_STORE: 'file' };
    const { code } = newEnrollmentCode(service.service.ctx, 'ann@example.org');
    const login = await runCanopy(home, ['login', '--server', proxy.url, '--code', code], env);
    expect(login.status, login.stderr).toBe(0);
    proxy.schedule(['damage'], /\/blocks\/car$/);
    const verified = await runCanopy(home, ['verify', '--bucket', 'Faulty', '--all'], env);
    expect(verified.status, verified.stderr).toBe(0);
    const lines = verified.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^verified 6 of 6 blocks .*: restorable as of /);
    expect(lines[1]).toBe(
      "1 block came back damaged and whole when fetched again: something on the way (the network, this computer's memory, the server's disk) damages data at times",
    );
  });

  it('keeps a stored backup when the blocks it fetches again to check them do not come', async () => {
    proxy.randomFaults(0, 1);
    const source = path.join(scratch, 'source');
    proxy.schedule(cutAsOftenAsTried(), /\/blocks\/car$/);
    const result = await engine.backup({ dir: source, bucket: 'Faulty', checkBlocks: 8 });
    expect(result.sampleCheck).toEqual({ failed: expect.stringMatching(/broke part-way/) });
    const versions = await engine.listVersions({ bucket: 'Faulty' });
    expect(versions.find((version) => version.state === 'active')?.id).toBe(result.versionId);
    proxy.schedule([]);
  });

  it('keeps a stored backup when listing the versions after it is refused', async () => {
    proxy.randomFaults(0, 1);
    const source = path.join(scratch, 'source');
    writeFileSync(path.join(source, 'small.txt'), 'small, and changed');
    const before = proxy.injected();
    const seenBefore = proxy.seen.length;
    // The backup lists the bucket's versions to build on the active one, and again once its
    // own is complete, to record them for browsing offline: a refusal then is no reason to
    // fail it.
    proxy.schedule(['pass', { status: 429, retryAfter: 1 }], /\/buckets\/metadata\?bucket_id=/);
    const result = await engine.backup({ dir: source, bucket: 'Faulty' });
    expect(proxy.injected() - before).toBe(1);
    const requests = proxy.seen.slice(seenBefore).map((seen) => `${seen.method} ${seen.path}`);
    expect(requests.at(-1)).toMatch(/^GET \/api\/v1\/buckets\/metadata\?bucket_id=/);
    expect(requests.at(-2)).toMatch(/^POST .*\/complete$/);
    const versions = await engine.listVersions({ bucket: 'Faulty' });
    expect(versions.find((version) => version.state === 'active')?.id).toBe(result.versionId);
    proxy.schedule([]);
  });

  it('verifies when the answer to pulling the version breaks off part-way, leaving no partial copy', async () => {
    proxy.randomFaults(0, 1);
    const before = proxy.injected();
    // Verification pulls the version's metadata afresh, whatever the cache holds.
    proxy.schedule(['cut'], /\/pull$/);
    const verified = await engine.verify({ bucket: 'Faulty', all: true });
    expect(proxy.injected() - before).toBe(1);
    expect(verified.checked).toBe(6);
    const cache = path.join(scratch, 'home', 'metadata');
    // Cached CARs and the whole indexes of their nodes, nothing else but the cache's tag.
    expect(readdirSync(cache).filter((name) => !/\.car(\.nodes)?$/.test(name))).toEqual([
      'CACHEDIR.TAG',
    ]);
  });

  it('stops with a network error, and leaves no partial file, when answers keep breaking off', async () => {
    proxy.randomFaults(0, 1);
    proxy.schedule(cutAsOftenAsTried(), /\/blocks\/car$/);
    const target = path.join(scratch, 'restored-cut-off');
    const failure = await engine.restore({ bucket: 'Faulty', to: target, overwrite: false }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: 'network' });
    expect((failure as Error).message).toMatch(/broke part-way/);
    const left = readdirSync(target, { recursive: true }).map(String);
    expect(left.filter((name) => name.endsWith('.bin') || name.includes('.canopy-'))).toEqual([]);
    proxy.schedule([]);
  });

  it('says which files a restore the network stopped part way left in place, and run again brings the rest', async () => {
    proxy.randomFaults(0, 1);
    await engine.createBucket({ name: 'PartWay', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'source-part-way');
    mkdirSync(source);
    // 5 MiB each: blocks/car answers of 8 MiB at most hold the first file and part of the next.
    const photos = ['a.jpg', 'b.jpg', 'c.jpg', 'd.jpg'].map((name) => ({
      name,
      bytes: randomBytes(5 * 1024 * 1024),
    }));
    for (const photo of photos) writeFileSync(path.join(source, photo.name), photo.bytes);
    await engine.backup({ dir: source, bucket: 'PartWay' });
    const target = path.join(scratch, 'restored-part-way');
    // The first answer comes whole; every one after it breaks off until the retries give up.
    proxy.schedule(['pass', ...Array<'cut'>(12).fill('cut')], /\/blocks\/car$/);
    const failure = await engine.restore({ bucket: 'PartWay', to: target, overwrite: false }).then(
      () => undefined,
      (error: unknown) => error,
    );
    proxy.schedule([]);
    const inPlace = readdirSync(target);
    expect(inPlace.length).toBeGreaterThan(0);
    expect(inPlace.length).toBeLessThan(photos.length);
    expect(failure).toMatchObject({ code: 'network', retryable: true });
    const files = inPlace.length === 1 ? 'the file' : `the ${inPlace.length} files`;
    expect((failure as Error).message).toMatch(/broke part-way/);
    expect((failure as Error).message).toContain(
      `; the restore stopped part way: ${files} it restored ${inPlace.length === 1 ? 'is' : 'are'} in place in ${target}, and running it again brings the rest`,
    );
    for (const name of inPlace) {
      const photo = photos.find((each) => each.name === name);
      expect(photo && readFileSync(path.join(target, name)).equals(photo.bytes)).toBe(true);
    }
    const again = await engine.restore({ bucket: 'PartWay', to: target, overwrite: false });
    expect(again.alreadyThere).toBe(inPlace.length);
    expect(again.files).toBe(photos.length - inPlace.length);
    for (const photo of photos)
      expect(readFileSync(path.join(target, photo.name)).equals(photo.bytes)).toBe(true);
  });

  it('says what a backup the network stopped part way sent, and run again sends only the rest', async () => {
    proxy.randomFaults(0, 1);
    const source = path.join(scratch, 'source-sent-part-way');
    mkdirSync(source);
    for (const name of ['a.bin', 'b.bin', 'c.bin'])
      writeFileSync(path.join(source, name), randomBytes(1_200_000));
    const home = path.join(scratch, 'home-sent-part-way');
    let cutOff = false;
    const sending = createEngine({
      home,
      secrets: new FileSecretStore(home),
      retry: { attempts: 3, baseDelayMs: 10, maxDelayMs: 50 },
      // The link stays down longer than the backup waits for it (service-outage.test.ts).
      outageBudgetMs: 300,
      shardTargetBytes: 1_500_000,
      // Once a shard is in, the link goes: every shard sent after it is reset.
      afterShardConfirmed: (confirmedSoFar) => {
        if (cutOff || confirmedSoFar === 0) return;
        cutOff = true;
        proxy.faultEach((method, url) => (/\/upload\/[^/]+\/[^/]+$/.test(url) ? 'reset' : 'pass'));
      },
    });
    try {
      const { code } = service.addUser('sam@example.org');
      await sending.login({ server: proxy.url, code });
      await sending.createBucket({ name: 'SentPartWay', type: 'backup', storageClass: 'hot' });
      const failure = await sending.backup({ dir: source, bucket: 'SentPartWay' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      proxy.faultEach(undefined);
      expect(failure).toMatchObject({ code: 'network', retryable: true });
      // What the message tells is what the queue holds: the shards confirmed, of all needed.
      const state = new Database(path.join(home, 'state.sqlite'), { readonly: true });
      const shards = state
        .prepare('SELECT bytes, confirmed FROM upload_shards WHERE needed = 1')
        .all() as Array<{ bytes: number; confirmed: number }>;
      state.close();
      const total = shards.reduce((sum, shard) => sum + shard.bytes, 0);
      const sent = shards.reduce((sum, shard) => sum + shard.confirmed * shard.bytes, 0);
      expect(sent).toBeGreaterThan(0);
      expect(sent).toBeLessThan(total);
      expect((failure as Error).message).toMatch(
        new RegExp(
          `; the backup stopped part way: ${formatBytes(sent)} of its ${formatBytes(total)} of data were sent and stay with the server; running it again sends only the rest$`,
        ),
      );
      const again = await sending.backup({ dir: source, bucket: 'SentPartWay' });
      expect(again.resumedVersionId).not.toBeNull();
      expect(again.bytesUploaded).toBe(total - sent);
    } finally {
      await sending.close();
    }
  });

  it('tells a restore stopped before it wrote anything as it came', async () => {
    proxy.randomFaults(0, 1);
    proxy.schedule(Array<'cut'>(12).fill('cut'), /\/blocks\/car$/);
    const failure = await engine
      .restore({ bucket: 'PartWay', to: path.join(scratch, 'restored-none'), overwrite: false })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    proxy.schedule([]);
    expect(failure).toMatchObject({ code: 'network' });
    expect((failure as Error).message).not.toMatch(/part way/);
  });

  it('completes when the answers to its push and completion break off, leaving no version pending', async () => {
    proxy.randomFaults(0, 1);
    await engine.createBucket({ name: 'Cut', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, 'source-cut');
    mkdirSync(source);
    const report = randomBytes(2_000_000);
    writeFileSync(path.join(source, 'report.bin'), report);
    // Room for this version once, not twice: a version the lost push left pending would hold
    // its 2 MB against the quota, and the push sent again would be refused.
    changeQuota(
      service.service.ctx,
      'ann@example.org',
      usageOf(service.service.ctx.db, annId) + 3_000_000,
    );
    try {
      const before = proxy.injected();
      // The push is taken and its answer cut; its second try passes; then the completion's
      // answer is cut.
      proxy.schedule(['cut', 'pass', 'cut'], /\/buckets\/metadata$|\/complete$/);
      const result = await engine.backup({ dir: source, bucket: 'Cut' });
      expect(proxy.injected() - before).toBe(2);
      await expectOnlyActive(engine, 'Cut', result.versionId);
      const target = path.join(scratch, 'restored-cut');
      await engine.restore({ bucket: 'Cut', to: target, overwrite: false });
      expect(readFileSync(path.join(target, 'report.bin')).equals(report)).toBe(true);
    } finally {
      changeQuota(service.service.ctx, 'ann@example.org', null);
    }
  });

  it('reports the version a lost push activated, without a second one, when no data was new', async () => {
    proxy.randomFaults(0, 1);
    const source = path.join(scratch, 'source-cut');
    renameSync(path.join(source, 'report.bin'), path.join(source, 'report-final.bin'));
    const versionsMade = (): number =>
      (service.service.ctx.db.prepare('SELECT COUNT(*) AS n FROM versions').get() as { n: number })
        .n;
    const madeBefore = versionsMade();
    const before = proxy.injected();
    // A push with no new data activates at once (§10.1); its answer is cut, and sent again it
    // finds its own version active.
    proxy.schedule(['cut'], /\/buckets\/metadata$/);
    const result = await engine.backup({ dir: source, bucket: 'Cut' });
    expect(proxy.injected() - before).toBe(1);
    expect(result.newBytes).toBe(0);
    // Told as the version this backup made, not as one it found with nothing changed since.
    expect(result.unchanged).toBe(false);
    const versions = await engine.listVersions({ bucket: 'Cut' });
    expect(versions.map((version) => version.state)).toEqual(['active', 'outdated']);
    expect(versions[0]?.id).toBe(result.versionId);
    // The service made this one version, and no other, deleted or not.
    expect(versionsMade() - madeBefore).toBe(1);
    expect((await engine.ls({ bucket: 'Cut' })).map((entry) => entry.name)).toEqual([
      'report-final.bin',
    ]);
  });

  it('keeps the shard sent beside one the host refused: the next run sends only the shards not confirmed', async () => {
    proxy.randomFaults(0, 1);
    const source = path.join(scratch, 'source-beside');
    mkdirSync(source);
    // Several shards (4.8 MB against a 1.5 MB target).
    for (let i = 0; i < 4; i += 1)
      writeFileSync(path.join(source, `part-${i}.bin`), randomBytes(1_200_000));
    await engine.createBucket({ name: 'Beside', type: 'backup', storageClass: 'hot' });
    /** The shard CIDs of the uploads the proxy has seen, in the order they arrived. */
    const shardUploads = (): string[] =>
      proxy.seen
        .filter((request) => request.method === 'PUT' && request.path.includes('/upload/'))
        .map((request) => request.path.split('/').at(-1) ?? '');
    // The first shard upload to arrive meets a host whose disk is full (final, not retried).
    proxy.schedule([{ status: 507 }], /\/upload\/[^/]+\/[^/]+$/);
    const before = shardUploads().length;
    const failure = await engine.backup({ dir: source, bucket: 'Beside' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: 'server_error' });
    const [refused, ...confirmed] = shardUploads().slice(before);
    // Another shard was on its way beside the refused one, and was let finish.
    expect(confirmed.length).toBeGreaterThanOrEqual(1);

    const result = await engine.backup({ dir: source, bucket: 'Beside' });
    const resumed = shardUploads().slice(before + 1 + confirmed.length);
    // The refused shard goes again; none the first run had confirmed does, and none goes twice.
    expect(resumed).toContain(refused);
    expect(resumed.filter((cid) => confirmed.includes(cid))).toEqual([]);
    expect(new Set(resumed).size).toBe(resumed.length);
    await expectOnlyActive(engine, 'Beside', result.versionId);
    const target = path.join(scratch, 'restored-beside');
    await engine.restore({ bucket: 'Beside', to: target, overwrite: false });
    for (const name of readdirSync(source))
      expect(
        readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
      ).toBe(true);
  });

  it('rebuilds when the answer to dropping a stale version breaks off', async () => {
    proxy.randomFaults(0, 1);
    // Its own user, and an engine that changes a file once a shard is confirmed: the upload
    // then meets a source that no longer matches, and drops its pending version.
    const { code } = service.addUser('bo@example.org');
    const source = path.join(scratch, 'source-drop');
    mkdirSync(source);
    writeFileSync(path.join(source, 'a.bin'), randomBytes(1_200_000));
    writeFileSync(path.join(source, 'b.bin'), randomBytes(1_200_000));
    const home = path.join(scratch, 'home-drop');
    let changed = false;
    const dropping = createEngine({
      home,
      secrets: new FileSecretStore(home),
      retry: { attempts: 8, baseDelayMs: 10, maxDelayMs: 200 },
      shardTargetBytes: 1_500_000,
      afterShardConfirmed: () => {
        if (changed) return;
        changed = true;
        writeFileSync(path.join(source, 'b.bin'), randomBytes(1_200_000));
        // The DELETE is carried out and its answer cut; sent again, it finds the version gone.
        proxy.schedule(['cut'], /\/buckets\/metadata\/[^/]+$/);
      },
    });
    try {
      await dropping.login({ server: proxy.url, code });
      await dropping.createBucket({ name: 'Drop', type: 'backup', storageClass: 'hot' });
      const before = proxy.injected();
      const result = await dropping.backup({ dir: source, bucket: 'Drop' });
      expect(proxy.injected() - before).toBe(1);
      await expectOnlyActive(dropping, 'Drop', result.versionId);
      const target = path.join(scratch, 'restored-drop');
      await dropping.restore({ bucket: 'Drop', to: target, overwrite: false });
      for (const name of ['a.bin', 'b.bin'])
        expect(
          readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
        ).toBe(true);
    } finally {
      await dropping.close();
    }
  });
});
