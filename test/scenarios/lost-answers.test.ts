import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { newEnrollmentCode } from '../../server/admin.ts';
import type { FaultProxy } from '../helpers/fault-proxy.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';
import type { TestService } from '../helpers/test-service.ts';

// Requests that cannot simply be sent again, over a network that loses the answer: the server
// carried them out, and the device did not hear it.
//
// `canopy login` with an enrollment code: the server registered the device key and spent the
// code. The login is done all the same, also by the next run with the same code when the first
// gave up; a code refused leaves nothing behind to wait on; and a key the server holds from a
// `canopy link` that did not finish is replaced, so the code still enrolls this device.
//
// `canopy buckets create`: the bucket is made, and the device takes it as made, with its key.
// `canopy snapshots create`: the snapshot is made, and told as made by this request.
// `canopy devices approve`: the key is registered, and told as approved.
// A deletion (of a bucket, a snapshot, a device key): sent again, it finds what it deleted gone,
// and is done; this device's own key, revoked, is found gone by the server refusing it.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-lost-answers-'));
let service: TestService;
let proxy: FaultProxy;
const engines: Engine[] = [];

beforeAll(async () => {
  ({ service, proxy } = await startProxiedService());
});
afterAll(async () => {
  for (const engine of engines) await engine.close();
  await proxy.close();
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** The engine's retry policy: quick, and as many attempts as tests schedule faults for. */
const RETRY = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };
const ENROLL = /\/auth\/enroll$/;
const REGWAIT = /\/start_regwait\//;

let homes = 0;
function newEngine(): Engine {
  const home = path.join(scratch, `home-${(homes += 1)}`);
  const engine = createEngine({ home, secrets: new FileSecretStore(home), retry: RETRY });
  engines.push(engine);
  return engine;
}

/** An engine logged in as a new user of `email`. */
async function loggedIn(email: string): Promise<Engine> {
  const { code } = service.addUser(email);
  const engine = newEngine();
  await engine.login({ server: proxy.url, code });
  return engine;
}

/** `canopy link` on `engine`, which shows its key and gives up waiting; the key's PEM. */
async function linkGivenUp(engine: Engine): Promise<string> {
  let shown = '';
  await expect(
    engine.link({
      server: proxy.url,
      timeoutMs: 0,
      onWaiting: (waiting) => {
        shown = waiting.pem;
      },
    }),
  ).rejects.toMatchObject({ code: 'timeout' });
  return shown;
}

/** A new interactive bucket `name` of `engine`, holding one version of one file; its id. */
async function oneVersionIn(engine: Engine, name: string): Promise<string> {
  await engine.createBucket({ name, type: 'interactive', storageClass: 'hot' });
  const source = path.join(scratch, name);
  mkdirSync(source);
  writeFileSync(path.join(source, 'notes.txt'), `the notes of ${name}`);
  return (await engine.backup({ dir: source, bucket: name })).versionId;
}

/** How many requests the proxy saw whose path matches `pattern`. */
function seen(pattern: RegExp): number {
  return proxy.seen.filter((request) => pattern.test(request.path)).length;
}

/** The account's device keys, as a device enrolled in it lists them. */
async function devicesOf(engine: Engine): Promise<string[]> {
  return (await engine.listDevices()).map((device) => device.fingerprint);
}

describe('a login whose answer is lost', () => {
  it('is done all the same when the answer breaks off after the server enrolled the key', async () => {
    const { code } = service.addUser('cut@example.org');
    const engine = newEngine();
    proxy.schedule(['cut'], ENROLL);
    const account = await engine.login({ server: proxy.url, code });
    expect(proxy.injected()).toBeGreaterThan(0);
    expect(account.email).toBe('cut@example.org');
    expect((await engine.whoami()).fingerprint).toBe(account.fingerprint);
    expect(await devicesOf(engine)).toEqual([account.fingerprint]);
    await engine.createBucket({ name: 'Photos', type: 'backup', storageClass: 'hot' });
  });

  it('is done all the same when the connection breaks before any answer, and the login sent again is refused as the code used', async () => {
    const { code } = service.addUser('lost@example.org');
    const engine = newEngine();
    const before = proxy.injected();
    proxy.schedule(['lost'], ENROLL);
    const account = await engine.login({ server: proxy.url, code });
    expect(proxy.injected() - before).toBe(1);
    expect(account.email).toBe('lost@example.org');
    expect(await devicesOf(engine)).toEqual([account.fingerprint]);
  });

  it('is finished by the next login with the same code, when the first gave up', async () => {
    const { code } = service.addUser('gave-up@example.org');
    const engine = newEngine();
    // The answer breaks off, and asking whether the key was registered fails as often as tried.
    proxy.faultEach((_method, requestPath) =>
      REGWAIT.test(requestPath) ? { status: 503 } : 'pass',
    );
    try {
      proxy.schedule(['cut'], ENROLL);
      await expect(engine.login({ server: proxy.url, code })).rejects.toMatchObject({
        code: 'server_error',
      });
    } finally {
      proxy.faultEach(undefined);
    }
    // Typed again: the server refuses the code the first login used, and the key it kept is
    // found registered.
    const account = await engine.login({ server: proxy.url, code });
    expect(account.email).toBe('gave-up@example.org');
    expect(await devicesOf(engine)).toEqual([account.fingerprint]);
  });

  it('leaves nothing to wait on when a code is refused, however often it is typed', async () => {
    service.addUser('typo@example.org');
    const engine = newEngine();
    const before = seen(REGWAIT);
    for (let attempt = 0; attempt < 2; attempt += 1)
      await expect(
        engine.login({ server: proxy.url, code: 'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE' }),
      ).rejects.toMatchObject({ code: 'enrollment_refused' });
    // A refused code is not taken for one a lost answer used.
    expect(seen(REGWAIT)).toBe(before);
    const { code } = newEnrollmentCode(service.service.ctx, 'typo@example.org');
    expect((await engine.login({ server: proxy.url, code })).email).toBe('typo@example.org');
  });

  it('enrolls a new key when the server holds this device’s key from a link that did not finish', async () => {
    service.addUser('linked@example.org');
    const other = await loggedIn('other@example.org');
    const engine = newEngine();
    // `canopy link` shows the key, and gives up waiting; another account approves it later.
    const approved = await other.approveDevice({ pem: await linkGivenUp(engine) });
    const { code } = newEnrollmentCode(service.service.ctx, 'linked@example.org');
    const account = await engine.login({ server: proxy.url, code });
    expect(account.email).toBe('linked@example.org');
    expect(account.fingerprint).not.toBe(approved.fingerprint);
    expect(await devicesOf(engine)).toEqual([account.fingerprint]);
    expect(await devicesOf(other)).toContain(approved.fingerprint);
  });
});

describe('a bucket created whose answer is lost', () => {
  it('is taken as made, and used at once, when the answer breaks off after the server made it', async () => {
    const engine = await loggedIn('bucket@example.org');
    const before = proxy.injected();
    proxy.schedule(['cut'], /\/buckets$/);
    const bucket = await engine.createBucket({
      name: ' Photos ',
      type: 'backup',
      storageClass: 'warm',
    });
    expect(proxy.injected() - before).toBe(1);
    expect(bucket).toMatchObject({ name: 'Photos', type: 'backup', storage_class: 'warm' });
    expect((await engine.listBuckets()).map((listed) => listed.id)).toEqual([bucket.id]);
    const source = path.join(scratch, 'photos');
    mkdirSync(source);
    writeFileSync(path.join(source, 'beach.jpg'), 'sand and sea');
    const backup = await engine.backup({ dir: source, bucket: 'Photos' });
    expect(backup.files).toBe(1);
    // Made once: asked again, the name is taken.
    await expect(
      engine.createBucket({ name: 'Photos', type: 'backup', storageClass: 'warm' }),
    ).rejects.toMatchObject({ code: 'conflict' });
  });
});

describe('a snapshot taken whose answer is lost', () => {
  it('is told as taken by this request, and pins the version', async () => {
    const engine = await loggedIn('pin@example.org');
    const versionId = await oneVersionIn(engine, 'Drafts');
    const before = proxy.injected();
    proxy.schedule(['cut'], /\/snapshot$/);
    const kept = await engine.snapshotVersion({ bucket: 'Drafts' });
    expect(proxy.injected() - before).toBe(1);
    expect(kept).toMatchObject({ versionId, keptAlready: false });
    const versions = await engine.listVersions({ bucket: 'Drafts' });
    expect(versions.map((version) => version.snapshot_id)).toEqual([kept.snapshot.id]);
  });
});

describe('a device approved whose answer is lost', () => {
  it('is told as approved, also when approved again, and not when another account holds the key', async () => {
    const approver = await loggedIn('approver@example.org');
    const pem = await linkGivenUp(newEngine());
    const before = proxy.injected();
    proxy.schedule(['cut'], /\/auth\/device_api_key$/);
    const approved = await approver.approveDevice({ pem, name: 'laptop' });
    expect(proxy.injected() - before).toBe(1);
    expect(await devicesOf(approver)).toContain(approved.fingerprint);
    // Run again: the key is this account's already.
    expect(await approver.approveDevice({ pem })).toEqual(approved);
    // Another account's approval of it is refused as before.
    const stranger = await loggedIn('stranger@example.org');
    await expect(stranger.approveDevice({ pem })).rejects.toMatchObject({ code: 'conflict' });
  });
});

describe('a deletion whose answer is lost', () => {
  it('is done, not told as a bucket or snapshot that is not there', async () => {
    const engine = await loggedIn('tidy@example.org');
    await oneVersionIn(engine, 'Old');
    const { snapshot } = await engine.snapshotVersion({ bucket: 'Old' });
    // The 204 of each is lost whole, and the DELETE sent again finds nothing to delete.
    const before = proxy.injected();
    proxy.schedule(['cut'], /\/snapshots\//);
    await engine.deleteSnapshot({ bucket: 'Old', snapshot: snapshot.id });
    proxy.schedule(['cut'], /\/buckets\/[0-9a-f-]+$/);
    await engine.deleteBucket({ name: 'Old' });
    expect(proxy.injected() - before).toBe(2);
    expect(await engine.listBuckets()).toEqual([]);
    // By hand, what is not there is told so.
    await expect(engine.deleteBucket({ name: 'Old' })).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe("this device's key revoked, whose answer is lost", () => {
  it('is revoked, not told as a key the server refuses', async () => {
    const engine = await loggedIn('leaving@example.org');
    const other = newEngine();
    await other.login({ server: proxy.url, code: (await engine.newEnrollmentCode()).code });
    const own = (await engine.listDevices()).find((device) => device.current);
    if (!own) throw new Error('the device lists no key of its own');
    const before = proxy.injected();
    proxy.schedule(['cut'], /\/auth\/device_api_key\//);
    await engine.revokeDevice(own.id);
    expect(proxy.injected() - before).toBe(1);
    expect(await devicesOf(other)).not.toContain(own.fingerprint);
    await expect(engine.listDevices()).rejects.toMatchObject({ code: 'not_authorized' });
  });
});
