import { randomUUID } from 'node:crypto';
import type { StateDb } from './database.ts';

export interface AccountRecord {
  mode: 'remote' | 'local';
  server_url: string | null;
  local_data_dir: string | null;
  user_id: string;
  key_id: string;
  fingerprint: string;
  email: string | null;
  device_name: string | null;
  device_key_account: string;
  enrolled_at: number;
}

export function readAccount(db: StateDb): AccountRecord | undefined {
  return db.prepare<[], AccountRecord>('SELECT * FROM account WHERE id = 1').get();
}

/**
 * Writes the enrolled account. Enrolling with another account (another user, or the same id on
 * another service) forgets the records of the buckets of the one before, as logging out does:
 * they are not this account's. What else this device kept of them is forgotten once this
 * account's listing finds them gone (their bucket keys stay, as after logging out: they are of
 * buckets that still exist).
 */
export function writeAccount(db: StateDb, record: AccountRecord): void {
  db.transaction(() => {
    const before = readAccount(db);
    if (before && !sameAccount(before, record)) db.prepare('DELETE FROM buckets').run();
    insertAccount(db, record);
  }).immediate();
}

function sameAccount(one: AccountRecord, other: AccountRecord): boolean {
  return (
    one.user_id === other.user_id &&
    one.mode === other.mode &&
    one.server_url === other.server_url &&
    one.local_data_dir === other.local_data_dir
  );
}

function insertAccount(db: StateDb, record: AccountRecord): void {
  db.prepare(
    `INSERT OR REPLACE INTO account (id, mode, server_url, local_data_dir, user_id, key_id, fingerprint, email,
       device_name, device_key_account, enrolled_at)
     VALUES (1, @mode, @server_url, @local_data_dir, @user_id, @key_id, @fingerprint, @email, @device_name,
       @device_key_account, @enrolled_at)`,
  ).run(record);
}

export function forgetAccount(db: StateDb): void {
  db.prepare('DELETE FROM account WHERE id = 1').run();
  db.prepare('DELETE FROM buckets').run();
}

/** This home's random id, created on first use; it namespaces keychain entries. */
export function homeId(db: StateDb): string {
  const row = db.prepare<[], { home_id: string }>('SELECT home_id FROM home WHERE id = 1').get();
  if (row) return row.home_id;
  const id = randomUUID();
  db.prepare('INSERT INTO home (id, home_id) VALUES (1, ?)').run(id);
  return id;
}

export interface BucketRecord {
  id: string;
  name: string;
  type: string;
  storage_class: string;
  bucket_key_account: string | null;
  bucket_key_fingerprint: string | null;
  updated_at: number;
}

export function upsertBucket(db: StateDb, record: BucketRecord): void {
  upsertBuckets(db, [record]);
}

/**
 * Records `records` in one transaction, with one statement: a listing of the account's buckets
 * records each bucket it lists, and each on its own cost a statement and a commit.
 */
export function upsertBuckets(db: StateDb, records: readonly BucketRecord[]): void {
  const upsert = db.prepare<[BucketRecord]>(
    `INSERT INTO buckets (id, name, type, storage_class, bucket_key_account, bucket_key_fingerprint, updated_at)
     VALUES (@id, @name, @type, @storage_class, @bucket_key_account, @bucket_key_fingerprint, @updated_at)
     ON CONFLICT (id) DO UPDATE SET name = excluded.name, type = excluded.type, storage_class = excluded.storage_class,
       bucket_key_account = COALESCE(excluded.bucket_key_account, buckets.bucket_key_account),
       bucket_key_fingerprint = COALESCE(excluded.bucket_key_fingerprint, buckets.bucket_key_fingerprint),
       updated_at = excluded.updated_at`,
  );
  db.transaction(() => {
    for (const record of records) upsert.run(record);
  })();
}

/** Every table of this device's state that keeps something per bucket, by its `bucket_id`. */
export const BUCKET_TABLES = [
  'known_active_versions',
  'known_versions',
  'upload_speeds',
  'shard_limits',
  'blocks_to_resend',
  'metadata_to_store_again',
  'superseded_versions',
  'pushes_in_flight',
  'restored_files',
  'retention_policies',
  // With their shards and planned blocks (ON DELETE CASCADE).
  'shard_plans',
  'uploads',
  // With their entries.
  'file_index_stages',
  'file_index_sources',
] as const;

/**
 * Forgets everything this device keeps of a deleted bucket, in one transaction: its record, the
 * versions last seen, the file index of each folder backed up to it, an upload left unfinished.
 * Returns the record it had (with the bucket key's account in the secret store), if any.
 */
export function forgetBucket(db: StateDb, id: string): BucketRecord | undefined {
  return db
    .transaction(() => {
      const record = readBucket(db, id);
      for (const table of BUCKET_TABLES)
        db.prepare(`DELETE FROM ${table} WHERE bucket_id = ?`).run(id);
      db.prepare('DELETE FROM buckets WHERE id = ?').run(id);
      return record;
    })
    .immediate();
}

/**
 * Every bucket this device keeps something of: a record, or rows in one of BUCKET_TABLES (a
 * record goes at logout, and the rest stays for the next login to the same account).
 */
export function bucketIdsKept(db: StateDb): string[] {
  const kept = [
    'SELECT id FROM buckets',
    ...BUCKET_TABLES.map((table) => `SELECT bucket_id FROM ${table}`),
  ];
  return db.prepare<[], string>(kept.join(' UNION ')).pluck().all();
}

/**
 * The versions of bucket `id` that this device's records name: the active one and the list as
 * last seen, those its file index and an unfinished upload describe, and those superseded.
 * Their metadata CARs may be in the local cache.
 */
export function versionIdsKeptOf(db: StateDb, id: string): Set<string> {
  const ids = new Set(
    db
      .prepare<{ id: string }, string>(
        `SELECT version_id FROM known_active_versions WHERE bucket_id = @id
         UNION SELECT version_id FROM file_index_sources WHERE bucket_id = @id
         UNION SELECT version_id FROM file_index_stages
           WHERE bucket_id = @id AND version_id IS NOT NULL
         UNION SELECT version_id FROM uploads WHERE bucket_id = @id
         UNION SELECT version_id FROM superseded_versions WHERE bucket_id = @id
         UNION SELECT version_id FROM metadata_to_store_again WHERE bucket_id = @id`,
      )
      .pluck()
      .all({ id }),
  );
  const listed = db
    .prepare<[string], string>('SELECT versions_json FROM known_versions WHERE bucket_id = ?')
    .pluck()
    .get(id);
  if (listed !== undefined) {
    for (const version of JSON.parse(listed) as Array<{ id?: unknown }>)
      if (typeof version.id === 'string') ids.add(version.id);
  }
  return ids;
}

export function readBucket(db: StateDb, id: string): BucketRecord | undefined {
  return db.prepare<[string], BucketRecord>('SELECT * FROM buckets WHERE id = ?').get(id);
}
