import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  openStateDatabase,
  readBucket,
  upsertBucket,
  writeAccount,
  type AccountRecord,
} from '../../../main/state/index.ts';

// A home enrolled again (its device key was removed from the keychain) with another account
// keeps no record of the buckets of the one before: they are not the new account's, and the
// new account's listing would take them for its own buckets deleted, keys and all.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-account-switch-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ann: AccountRecord = {
  mode: 'remote',
  server_url: 'https://backup.example.org',
  local_data_dir: null,
  user_id: 'user-ann',
  key_id: 'key-1',
  fingerprint: 'f1',
  email: 'ann@example.org',
  device_name: null,
  device_key_account: 'device-key:1',
  enrolled_at: 1,
};

describe('writeAccount', () => {
  it("keeps the bucket records for the same account enrolled again, not for another's", () => {
    const db = openStateDatabase(path.join(scratch, 'state.sqlite'));
    try {
      writeAccount(db, ann);
      upsertBucket(db, {
        id: 'b1',
        name: 'Photos',
        type: 'backup',
        storage_class: 'hot',
        bucket_key_account: 'bucket-key:1',
        bucket_key_fingerprint: null,
        updated_at: 1,
      });
      // A new device key for the same user on the same service.
      writeAccount(db, { ...ann, key_id: 'key-2', device_key_account: 'device-key:2' });
      expect(readBucket(db, 'b1')?.bucket_key_account).toBe('bucket-key:1');
      // The same user id on another service is another account.
      writeAccount(db, { ...ann, server_url: 'https://other.example.org' });
      expect(readBucket(db, 'b1')).toBeUndefined();
    } finally {
      db.close();
    }
  });
});
