import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  BUCKET_TABLES,
  bucketIdsKept,
  forgetAccount,
  forgetBucket,
  rememberActiveVersion,
  rememberVersions,
  versionIdsKeptOf,
  openStateDatabase,
  readBucket,
  upsertBucket,
} from '../../../main/state/index.ts';

// Deleting a bucket forgets all this device keeps of it: every table that keeps something per
// bucket, including one a later migration adds.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-forget-bucket-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('forgetBucket', () => {
  it('covers every table with a bucket_id, and the bucket record', () => {
    const db = openStateDatabase(path.join(scratch, 'state.sqlite'));
    try {
      const tables = db
        .prepare<[], string>("SELECT name FROM sqlite_master WHERE type = 'table'")
        .pluck()
        .all()
        .filter((table) =>
          db
            .prepare<[], { name: string }>(`PRAGMA table_info(${table})`)
            .all()
            .some((column) => column.name === 'bucket_id'),
        );
      expect([...BUCKET_TABLES].sort()).toEqual(tables.sort());

      upsertBucket(db, {
        id: 'b1',
        name: 'Photos',
        type: 'backup',
        storage_class: 'hot',
        bucket_key_account: 'bucket-key:1',
        bucket_key_fingerprint: null,
        updated_at: 1,
      });
      expect(forgetBucket(db, 'b1')?.bucket_key_account).toBe('bucket-key:1');
      expect(readBucket(db, 'b1')).toBeUndefined();
      expect(forgetBucket(db, 'b1')).toBeUndefined();
    } finally {
      db.close();
    }
  });

  it('finds the buckets kept after logout, and the versions their records name', () => {
    const db = openStateDatabase(path.join(scratch, 'kept.sqlite'));
    try {
      upsertBucket(db, {
        id: 'b2',
        name: 'Music',
        type: 'backup',
        storage_class: 'hot',
        bucket_key_account: null,
        bucket_key_fingerprint: null,
        updated_at: 1,
      });
      rememberActiveVersion(db, {
        bucket_id: 'b2',
        bucket_name: 'Music',
        version_id: 'v3',
        seen_at: 1,
      });
      rememberVersions(db, {
        bucket_id: 'b2',
        bucket_name: 'Music',
        versions_json: JSON.stringify([{ id: 'v3' }, { id: 'v2' }]),
        seen_at: 1,
      });
      rememberActiveVersion(db, {
        bucket_id: 'b3',
        bucket_name: 'Films',
        version_id: 'v9',
        seen_at: 1,
      });
      expect(bucketIdsKept(db).sort()).toEqual(['b2', 'b3']);
      // Logging out forgets the records, not what the next login to the account builds on.
      forgetAccount(db);
      expect(bucketIdsKept(db).sort()).toEqual(['b2', 'b3']);
      expect([...versionIdsKeptOf(db, 'b2')].sort()).toEqual(['v2', 'v3']);
      expect([...versionIdsKeptOf(db, 'b3')]).toEqual(['v9']);
      forgetBucket(db, 'b2');
      expect(bucketIdsKept(db)).toEqual(['b3']);
      expect([...versionIdsKeptOf(db, 'b2')]).toEqual([]);
    } finally {
      db.close();
    }
  });
});
