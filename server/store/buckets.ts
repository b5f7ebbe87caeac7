import {
  newUuid,
  type Bucket,
  type BucketType,
  type StorageClass,
} from '../../main/protocol/index.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';
import { isoTimestamp } from './time.ts';

export interface BucketRow {
  id: string;
  owner_id: string;
  name: string;
  type: BucketType;
  storage_class: StorageClass;
  replicas: number;
  updated_at: number;
  active_version_id: string | null;
  deleted_at: number | null;
}

export function toBucketDto(row: BucketRow): Bucket {
  return {
    id: row.id,
    owner_id: row.owner_id,
    name: row.name,
    type: row.type,
    storage_class: row.storage_class,
    updated_at: isoTimestamp(row.updated_at),
    replicas: row.replicas,
    // One host keeps one copy whatever was asked (§7.2).
    effective_replicas: 1,
  };
}

export function findLiveBucket(db: Db, ownerId: string, id: string): BucketRow | undefined {
  return sql<[string, string], BucketRow>(
    db,
    'SELECT * FROM buckets WHERE owner_id = ? AND id = ? AND deleted_at IS NULL',
  ).get(ownerId, id);
}

export function findBucketById(db: Db, id: string): BucketRow | undefined {
  return sql<[string], BucketRow>(db, 'SELECT * FROM buckets WHERE id = ?').get(id);
}

export function isNameTaken(
  db: Db,
  ownerId: string,
  name: string,
  exceptId: string | null,
): boolean {
  const row = sql<[string, string], { id: string }>(
    db,
    'SELECT id FROM buckets WHERE owner_id = ? AND name = ? AND deleted_at IS NULL',
  ).get(ownerId, name);
  return row !== undefined && row.id !== exceptId;
}

export function insertBucket(
  db: Db,
  input: { ownerId: string; name: string; type: BucketType; storageClass: StorageClass },
  now: number,
): BucketRow {
  const id = newUuid();
  sql(
    db,
    'INSERT INTO buckets (id, owner_id, name, type, storage_class, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
  ).run(id, input.ownerId, input.name, input.type, input.storageClass, now);
  const row = findLiveBucket(db, input.ownerId, id);
  if (!row) throw new Error('bucket insert lost');
  return row;
}

export function insertBucketKey(
  db: Db,
  input: { bucketId: string; fingerprint: string; spki: Uint8Array },
  now: number,
): string {
  const id = newUuid();
  sql(
    db,
    'INSERT INTO bucket_keys (id, bucket_id, fingerprint, spki, approved, created_at) VALUES (?, ?, ?, ?, 1, ?)',
  ).run(id, input.bucketId, input.fingerprint, Buffer.from(input.spki), now);
  return id;
}

export function listLiveBuckets(db: Db, ownerId: string): Bucket[] {
  // BINARY collation compares UTF-8 bytes, the order §3 asks for.
  return sql<[string], BucketRow>(
    db,
    'SELECT * FROM buckets WHERE owner_id = ? AND deleted_at IS NULL ORDER BY name COLLATE BINARY, id',
  )
    .all(ownerId)
    .map(toBucketDto);
}

export function updateBucket(
  db: Db,
  id: string,
  update: { name?: string; replicas?: number },
  now: number,
): void {
  const row = findBucketById(db, id);
  if (!row) throw new Error('bucket vanished');
  sql(db, 'UPDATE buckets SET name = ?, replicas = ?, updated_at = ? WHERE id = ?').run(
    update.name ?? row.name,
    update.replicas ?? row.replicas,
    now,
    id,
  );
}

export function setActiveVersion(
  db: Db,
  bucketId: string,
  versionId: string | null,
  now: number,
): void {
  sql(db, 'UPDATE buckets SET active_version_id = ?, updated_at = ? WHERE id = ?').run(
    versionId,
    now,
    bucketId,
  );
}

export function markBucketDeleted(db: Db, id: string, now: number): void {
  sql(db, 'UPDATE buckets SET deleted_at = ?, active_version_id = NULL WHERE id = ?').run(now, id);
}
