import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// The device key is read from the keychain once per engine, not for each request: a keychain
// read is a round trip to the keychain's service, and a locked or strict keychain may ask the
// user each time.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-key-reads-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A secrets file that counts how often a secret is read. */
class CountingSecretStore extends FileSecretStore {
  reads = 0;
  override async get(account: string): Promise<string | null> {
    this.reads += 1;
    return super.get(account);
  }
}

/** A home named `name` logged in to the embedded service, one file backed up to bucket Keys. */
async function backedUpHome(name: string): Promise<string> {
  const source = path.join(scratch, `${name}-source`);
  writeSettled(path.join(source, 'notes.txt'), 'notes');
  const home = path.join(scratch, `${name}-home`);
  const setup = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  try {
    await setup.loginLocal({});
    await setup.createBucket({ name: 'Keys', type: 'backup', storageClass: 'hot' });
    await setup.backup({ dir: source, bucket: 'Keys' });
  } finally {
    await setup.close();
  }
  return home;
}

describe('the device key', () => {
  it('is read once for a backup, a listing, a browse, a restore and a verify in one engine', async () => {
    const source = path.join(scratch, 'source');
    writeSettled(path.join(source, 'notes.txt'), 'notes');
    writeSettled(path.join(source, 'photos', 'a.jpg'), 'not really a photo');
    const home = path.join(scratch, 'home');
    const setup = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    await setup.loginLocal({});
    await setup.createBucket({ name: 'Keys', type: 'backup', storageClass: 'hot' });
    await setup.close();

    const secrets = new CountingSecretStore(home);
    const engine = createEngine({ home, secrets, startLocalService });
    try {
      await engine.backup({ dir: source, bucket: 'Keys' });
      expect(await engine.listVersions({ bucket: 'Keys' })).toHaveLength(1);
      expect((await engine.browse({ bucket: 'Keys', path: 'photos' })).entries).toHaveLength(1);
      await engine.restore({
        bucket: 'Keys',
        to: path.join(scratch, 'restored'),
        overwrite: false,
      });
      await engine.verify({ bucket: 'Keys', all: true });
      expect(secrets.reads).toBe(1);
    } finally {
      await engine.close();
    }
  });

  it('gone from the secret store: a request says to log in again, which enrolls the device anew and finds its backups', async () => {
    const home = await backedUpHome('gone');
    // As a user clearing the keychain would.
    rmSync(path.join(home, 'secrets.json'));

    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      const restore = () =>
        engine.restore({
          bucket: 'Keys',
          to: path.join(scratch, 'gone-restored'),
          overwrite: false,
        });
      await expect(restore()).rejects.toMatchObject({
        code: 'secret_store',
        message: `this device's key is missing from ${path.join(home, 'secrets.json')}: log in again to enroll this device anew; its backups are untouched`,
      });
      await engine.loginLocal({});
      expect(await restore()).toMatchObject({ files: 1 });
      // Enrolled anew, the home is enrolled: a second login is refused as before.
      await expect(engine.loginLocal({})).rejects.toMatchObject({ code: 'already_logged_in' });
    } finally {
      await engine.close();
    }
  });

  it('in a secrets file damaged on its disk: the file is set aside and told, and logging in again finds the backups', async () => {
    const home = await backedUpHome('damaged');
    // Cut short, as a disk that lost its last write leaves it.
    const secrets = path.join(home, 'secrets.json');
    writeFileSync(secrets, readFileSync(secrets, 'utf8').slice(0, 80));

    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      await expect(engine.listBuckets()).rejects.toMatchObject({
        code: 'secret_store',
        message: expect.stringMatching(
          /was damaged \(it does not read as the secrets file Canopy writes\) and is kept aside as .*secrets\.json\.damaged-.*: the device key it held is lost with it; log in again to enroll this device anew; its backups are untouched$/,
        ),
      });
      await engine.loginLocal({});
      expect(
        await engine.restore({
          bucket: 'Keys',
          to: path.join(scratch, 'damaged-restored'),
          overwrite: false,
        }),
      ).toMatchObject({ files: 1 });
    } finally {
      await engine.close();
    }
  });
});
