import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { BackupLock } from '../../main/state/index.ts';
import { bucketKeyAccountOf, cachedCarsOf, keptRowsOf } from '../helpers/kept-state.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// A bucket deleted from another device of the same user: this device no longer keeps its file
// index, its versions as last seen, the copies of its versions' lists of files, or its bucket
// key, once it sees the bucket gone from the service's list; and it does not show the deleted
// bucket's files for a new bucket of the same name while the service cannot be reached.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-deleted-elsewhere-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
let service: TestService;
/** Between this device and the service. */
let proxy: FaultProxy;
let serviceClosed = false;
let thisDevice: Engine;
let otherDevice: Engine;

function engineAt(at: string): Engine {
  return createEngine({
    home: at,
    secrets: new FileSecretStore(at),
    retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
  });
}

/** Rows of bucket `id` in the tables that keep something per bucket, by table. */
const keptRows = (id: string) => keptRowsOf(home, id);
const bucketKeyAccount = (id: string) => bucketKeyAccountOf(home, id);
const cachedCars = () => cachedCarsOf(home);

beforeAll(async () => {
  service = await startTestService();
  proxy = await startFaultProxy(service.url);
  mkdirSync(source);
  writeFileSync(path.join(source, 'letter.txt'), 'dear reader\n');
  thisDevice = engineAt(home);
  const { code } = service.addUser('ann@example.org');
  await thisDevice.login({ server: proxy.url, code });
  otherDevice = engineAt(path.join(scratch, 'other-home'));
  await otherDevice.login({
    server: service.url,
    code: (await thisDevice.newEnrollmentCode()).code,
  });
});
afterAll(async () => {
  await thisDevice.close();
  await otherDevice.close();
  await proxy.close();
  if (!serviceClosed) await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a bucket deleted from another device', () => {
  it('is forgotten here at the next listing, unless a backup to it runs', async () => {
    const bucket = await thisDevice.createBucket({
      name: 'Letters',
      type: 'backup',
      storageClass: 'hot',
    });
    const kept = await thisDevice.createBucket({
      name: 'Kept',
      type: 'backup',
      storageClass: 'hot',
    });
    await thisDevice.backup({ dir: source, bucket: 'Letters' });
    writeFileSync(path.join(source, 'postscript.txt'), 'ps\n');
    await thisDevice.backup({ dir: source, bucket: 'Letters' });
    await thisDevice.backup({ dir: source, bucket: 'Kept' });
    await thisDevice.listVersions({ bucket: 'Letters' });
    const keyAccount = bucketKeyAccount(bucket.id);
    if (keyAccount === null) throw new Error('the bucket was created here, with its key');
    expect(keptRows(bucket.id)).toEqual({ buckets: 1, fileIndex: 1, versions: 1, active: 1 });
    expect(cachedCars()).toHaveLength(3);

    await otherDevice.deleteBucket({ name: 'Letters' });

    // The service cannot say whether the bucket is gone (it was listed without it): the list is
    // shown all the same, and the records stay.
    proxy.schedule([{ status: 503 }, { status: 503 }], new RegExp(`/buckets/${bucket.id}$`));
    expect((await thisDevice.listBuckets()).map((listed) => listed.name)).toEqual(['Kept']);
    expect(proxy.injected()).toBe(2);
    expect(keptRows(bucket.id)).toEqual({ buckets: 1, fileIndex: 1, versions: 1, active: 1 });

    // A backup to it is running here (it will find its bucket gone): its records stay.
    const backupRunning = BackupLock.tryAcquire(home, bucket.id);
    try {
      expect((await thisDevice.listBuckets()).map((listed) => listed.name)).toEqual(['Kept']);
      expect(keptRows(bucket.id)).toEqual({ buckets: 1, fileIndex: 1, versions: 1, active: 1 });
    } finally {
      backupRunning?.release();
    }

    expect((await thisDevice.listBuckets()).map((listed) => listed.name)).toEqual(['Kept']);
    expect(keptRows(bucket.id)).toEqual({ buckets: 0, fileIndex: 0, versions: 0, active: 0 });
    expect(await new FileSecretStore(home).get(keyAccount)).toBeNull();
    // The other bucket's list of files stays, and so does all else of it.
    expect(cachedCars()).toHaveLength(1);
    expect(keptRows(kept.id)).toEqual({ buckets: 1, fileIndex: 1, versions: 1, active: 1 });
    expect(await new FileSecretStore(home).get(bucketKeyAccount(kept.id) ?? '')).not.toBeNull();

    // A new bucket of the old one's name, never backed up here: while the service cannot be
    // reached, it is not shown with the deleted bucket's files.
    await otherDevice.createBucket({ name: 'Letters', type: 'backup', storageClass: 'hot' });
    await thisDevice.listBuckets();
    await service.close();
    serviceClosed = true;
    await expect(thisDevice.ls({ bucket: 'Letters' })).rejects.toThrow('cannot reach');
  });
});
