import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  FileSecretStore,
  KeychainSecretStore,
  loadOrCreateKeyPair,
  openSecretStore,
  secretStoreChoice,
  TokenMinter,
} from '../../../main/identity/index.ts';
import { decodeCompactJws } from '../../../main/protocol/index.ts';
import { runHelper } from '../../helpers/helper-process.ts';
import { anotherProcessHolding } from '../../helpers/sqlite-holder.ts';

// The keychain adapter runs against a real Secret Service (gnome-keyring in a private D-Bus
// session, set up by test/with-keyring.sh); the file adapter against a real temp folder.

const homes: string[] = [];
function newHome(): string {
  const home = mkdtempSync(path.join(os.tmpdir(), 'canopy-home-'));
  homes.push(home);
  return home;
}
afterAll(() => {
  for (const home of homes) rmSync(home, { recursive: true, force: true });
});

describe('KeychainSecretStore (real Secret Service)', () => {
  it('stores, reads back and deletes a secret', async () => {
    const store = new KeychainSecretStore();
    expect(await store.probe()).toBe(true);
    const account = `test-${randomUUID()}`;
    expect(await store.get(account)).toBeNull();
    await store.set(account, 'first');
    await store.set(account, 'second');
    expect(await store.get(account)).toBe('second');
    expect(await store.delete(account)).toBe(true);
    expect(await store.delete(account)).toBe(false);
    expect(await store.get(account)).toBeNull();
  });

  it('is what openSecretStore picks when a keychain answers, and keeps the device key out of the home', async () => {
    const home = newHome();
    const opened = await openSecretStore(home, 'auto');
    expect(opened.store.kind).toBe('keychain');
    expect(opened.warning).toBeNull();
    const account = `device-${randomUUID()}`;
    const key = await loadOrCreateKeyPair(opened.store, account);
    const again = await loadOrCreateKeyPair(opened.store, account);
    expect(again.fingerprint).toBe(key.fingerprint);
    expect(() => statSync(path.join(home, 'secrets.json'))).toThrow();
    expect(await opened.store.delete(account)).toBe(true);
    // Deleted from the keychain, it leaves the home as it was: no file of secrets, no lock.
    expect(readdirSync(home)).toEqual([]);
  });
});

describe('openSecretStore with a keychain answering', () => {
  it('finds keys put in the secrets file while none answered, puts new ones in the keychain, and deletes from both', async () => {
    const home = newHome();
    const account = `device-${randomUUID()}`;
    const key = await loadOrCreateKeyPair(new FileSecretStore(home), account);
    const { store } = await openSecretStore(home, 'auto');
    expect(store.kind).toBe('keychain');
    expect((await loadOrCreateKeyPair(store, account)).fingerprint).toBe(key.fingerprint);
    expect(store.kindHolding?.(account)).toBe('file');
    const bucketKey = `bucket-${randomUUID()}`;
    await store.set(bucketKey, 'a bucket key');
    expect(await new KeychainSecretStore().get(bucketKey)).toBe('a bucket key');
    expect(store.kindHolding?.(bucketKey)).toBe('keychain');
    expect(await store.delete(account)).toBe(true);
    expect(await new FileSecretStore(home).get(account)).toBeNull();
    expect(await store.delete(bucketKey)).toBe(true);
    expect(await new KeychainSecretStore().get(bucketKey)).toBeNull();
    // Forced, the keychain is looked in alone.
    await loadOrCreateKeyPair(new FileSecretStore(home), account);
    expect(await (await openSecretStore(home, 'keychain')).store.get(account)).toBeNull();
  });
});

describe('FileSecretStore', () => {
  it('keeps secrets in a 0600 file and survives a reopen', async () => {
    const home = newHome();
    const store = new FileSecretStore(home);
    const key = await loadOrCreateKeyPair(store, 'device');
    const mode = statSync(store.location).mode & 0o777;
    expect(mode).toBe(0o600);
    expect(readFileSync(store.location, 'utf8')).toContain('BEGIN PRIVATE KEY');
    expect((await loadOrCreateKeyPair(new FileSecretStore(home), 'device')).fingerprint).toBe(
      key.fingerprint,
    );
    expect(await store.delete('device')).toBe(true);
    expect(await store.get('device')).toBeNull();
  });

  it('sets a file damaged on its disk aside, says so once, and works on without it', async () => {
    const home = newHome();
    const store = new FileSecretStore(home);
    await store.set('device', 'the key');
    writeFileSync(store.location, '{"device": "the k');
    const refused = store.get('device');
    await expect(refused).rejects.toMatchObject({ code: 'secret_store' });
    const { message } = (await refused.catch((error: unknown) => error)) as Error;
    const aside = readdirSync(home).filter((name) => name.startsWith('secrets.json.damaged-'));
    expect(aside).toHaveLength(1);
    expect(message).toBe(
      `${store.location} was damaged (it does not read as the secrets file Canopy writes) and is kept aside as ${path.join(home, aside[0] ?? '')}: the device key it held is lost with it; log in again to enroll this device anew; its backups are untouched`,
    );
    // Kept as it was, for whoever can mend it by hand.
    expect(readFileSync(path.join(home, aside[0] ?? ''), 'utf8')).toBe('{"device": "the k');
    expect(await store.get('device')).toBeNull();
    await store.set('device', 'a new key');
    expect(await new FileSecretStore(home).get('device')).toBe('a new key');
  });

  it('keeps every secret that processes store at once, none written over', async () => {
    // Two commands creating buckets at once each store a key: neither may lose the other's.
    const home = newHome();
    const go = path.join(home, 'go');
    const writers = ['one', 'two', 'three', 'four'].map((prefix) =>
      runHelper('secret-writer', [home, prefix, '25', go]),
    );
    // Once all have started (some seconds on a busy machine), all write at once.
    await vi.waitFor(
      () => expect(writers.map((writer) => writer.output())).toEqual(Array(4).fill('ready\n')),
      { timeout: 25_000, interval: 20 },
    );
    writeFileSync(go, '');
    for (const writer of writers)
      expect(await writer.exited, writer.output()).toEqual({ code: 0, signal: null });
    const store = new FileSecretStore(home);
    for (const prefix of ['one', 'two', 'three', 'four'])
      for (let n = 0; n < 25; n += 1)
        expect(await store.get(`${prefix}-${n}`)).toBe(`secret ${prefix} ${n}`);
    expect(statSync(store.location).mode & 0o777).toBe(0o600);
  }, 30_000);

  it('says which file it could not lock, and changes nothing, when the lock cannot be made', async () => {
    const home = newHome();
    const store = new FileSecretStore(home);
    await store.set('kept', 'before');
    // Something else holds the lock file's name: no lock, so no change either.
    rmSync(path.join(home, 'secrets.lock'));
    mkdirSync(path.join(home, 'secrets.lock'));
    await expect(store.set('new', 'after')).rejects.toMatchObject({
      code: 'secret_store',
      message: `cannot lock ${path.join(home, 'secrets.lock')}`,
    });
    await expect(store.delete('kept')).rejects.toMatchObject({ code: 'secret_store' });
    expect(await store.get('kept')).toBe('before');
    expect(await store.get('new')).toBeNull();
  });

  it('says another process holds the lock when it waited long enough, and changes nothing', async () => {
    const home = newHome();
    await new FileSecretStore(home).set('kept', 'before');
    // As FileSecretStore locks it, until killed.
    const holder = await anotherProcessHolding(
      path.join(home, 'secrets.lock'),
      `db.pragma('journal_mode = MEMORY');
       db.exec('BEGIN EXCLUSIVE');`,
      'setInterval(() => {}, 60_000);',
    );
    try {
      const impatient = new FileSecretStore(home, { lockWaitMs: 300 });
      await expect(impatient.set('new', 'after')).rejects.toMatchObject({
        code: 'secret_store',
        retryable: true,
        message: `another Canopy process kept ${path.join(home, 'secrets.lock')} locked for more than 0.3 s; try again`,
      });
      await expect(impatient.delete('kept')).rejects.toMatchObject({ retryable: true });
      expect(await impatient.get('kept')).toBe('before');
    } finally {
      holder.kill();
    }
    // The kernel drops the lock with its process: the same change goes through now.
    await new Promise((resolve) => holder.once('exit', resolve));
    const store = new FileSecretStore(home, { lockWaitMs: 300 });
    await store.set('new', 'after');
    expect(await store.get('new')).toBe('after');
    expect(await store.get('kept')).toBe('before');
  });

  it('is chosen when forced, and CANOPY_SECRET_STORE values are checked', async () => {
    const opened = await openSecretStore(newHome(), secretStoreChoice('file'));
    expect(opened.store.kind).toBe('file');
    expect(secretStoreChoice(undefined)).toBe('auto');
    expect(() => secretStoreChoice('vault')).toThrow(
      'CANOPY_SECRET_STORE must be "keychain" or "file"',
    );
  });
});

describe('TokenMinter', () => {
  it('reuses a token until 30 s before it expires, then mints a new one', async () => {
    const key = await loadOrCreateKeyPair(new FileSecretStore(newHome()), 'device');
    let now = 1_800_000_000_000;
    const minter = new TokenMinter(key, 'user-1', () => now);
    const first = minter.token();
    now += 269_000;
    expect(minter.token()).toBe(first);
    now += 2_000;
    const second = minter.token();
    expect(second).not.toBe(first);
    expect(decodeCompactJws(second)?.claims['sub']).toBe('user-1');
  });
});
