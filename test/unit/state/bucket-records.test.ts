import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  openStateDatabase,
  readBucket,
  upsertBucket,
  upsertBuckets,
  type BucketRecord,
} from '../../../main/state/index.ts';

// A listing of the account's buckets records each of them: names and classes as the service
// tells them now, the bucket key this device made kept where the listing names none.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-bucket-records-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function listed(id: string, name: string, updatedAt: number): BucketRecord {
  return {
    id,
    name,
    type: 'backup',
    storage_class: 'hot',
    bucket_key_account: null,
    bucket_key_fingerprint: null,
    updated_at: updatedAt,
  };
}

describe('upsertBuckets', () => {
  it('records a listing of many buckets, takes renames, and keeps the key each was made with', () => {
    const db = openStateDatabase(path.join(scratch, 'state.sqlite'));
    try {
      upsertBucket(db, {
        ...listed('b1', 'Photos', 1),
        bucket_key_account: 'bucket-key:1',
        bucket_key_fingerprint: 'fp-1',
      });
      const listing = Array.from({ length: 300 }, (_, index) =>
        listed(`b${index + 1}`, `Bucket ${index + 1}`, 2),
      );
      upsertBuckets(db, listing);
      expect(readBucket(db, 'b1')).toEqual({
        ...listed('b1', 'Bucket 1', 2),
        bucket_key_account: 'bucket-key:1',
        bucket_key_fingerprint: 'fp-1',
      });
      expect(readBucket(db, 'b300')).toEqual(listed('b300', 'Bucket 300', 2));
      expect(db.prepare('SELECT COUNT(*) FROM buckets').pluck().get()).toBe(300);
      upsertBuckets(db, []);
      expect(db.prepare('SELECT COUNT(*) FROM buckets').pluck().get()).toBe(300);
    } finally {
      db.close();
    }
  });
});
