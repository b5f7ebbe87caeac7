import type { Metadata, VersionState } from '../../main/protocol/index.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';
import { unixSeconds } from './time.ts';

export type StoredVersionState = VersionState | 'deleted';

export interface VersionRow {
  id: string;
  bucket_id: string;
  user_id: string;
  root_cid: string;
  metadata_cid: string;
  expected_data_size: number;
  received_total: number;
  state: StoredVersionState;
  created_at: number;
  updated_at: number;
  window_ends_at: number;
  snapshot_id: string | null;
  previous_id: string | null;
  valid_keys: string;
  car_bytes: number;
  device_fingerprint: string;
  activated_seq: number | null;
}

export function toMetadataDto(row: VersionRow): Metadata {
  const waiting = row.state === 'pending' || row.state === 'upload_failed';
  return {
    id: row.id,
    root_cid: row.root_cid,
    metadata_cid: row.metadata_cid,
    // §7.3: the promised size until activation, what actually arrived from then on.
    data_size: waiting ? row.expected_data_size : row.received_total,
    state: row.state === 'deleted' ? 'outdated' : row.state,
    created_at: unixSeconds(row.created_at),
    updated_at: unixSeconds(row.updated_at),
    snapshot_id: row.snapshot_id,
    bucket_id: row.bucket_id,
    previous_id: row.previous_id,
  };
}

/** A version the user can see: not deleted, in a live bucket of theirs. */
export function findVisibleVersion(db: Db, userId: string, id: string): VersionRow | undefined {
  return sql<[string, string], VersionRow>(
    db,
    `SELECT v.* FROM versions v JOIN buckets b ON b.id = v.bucket_id
     WHERE v.user_id = ? AND v.id = ? AND v.state != 'deleted' AND b.deleted_at IS NULL`,
  ).get(userId, id);
}

export function findVersion(db: Db, id: string): VersionRow | undefined {
  return sql<[string], VersionRow>(db, 'SELECT * FROM versions WHERE id = ?').get(id);
}

export function listVisibleVersions(db: Db, userId: string, bucketId: string | null): Metadata[] {
  const rows =
    bucketId === null
      ? sql<[string], VersionRow>(
          db,
          `SELECT v.* FROM versions v JOIN buckets b ON b.id = v.bucket_id
           WHERE v.user_id = ? AND v.state != 'deleted' AND b.deleted_at IS NULL ORDER BY v.seq DESC`,
        ).all(userId)
      : sql<[string, string], VersionRow>(
          db,
          `SELECT * FROM versions WHERE user_id = ? AND bucket_id = ? AND state != 'deleted' ORDER BY seq DESC`,
        ).all(userId, bucketId);
  return rows.map(toMetadataDto);
}

export interface NewVersion {
  id: string;
  bucketId: string;
  userId: string;
  rootCid: string;
  metadataCid: string;
  expectedDataSize: number;
  previousId: string | null;
  validKeys: readonly string[];
  carBytes: number;
  deviceFingerprint: string;
  windowEndsAt: number;
}

export function insertVersion(db: Db, input: NewVersion, now: number): void {
  sql(
    db,
    `INSERT INTO versions (id, bucket_id, user_id, root_cid, metadata_cid, expected_data_size, state,
       created_at, updated_at, window_ends_at, previous_id, valid_keys, car_bytes, device_fingerprint)
     VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    input.id,
    input.bucketId,
    input.userId,
    input.rootCid,
    input.metadataCid,
    input.expectedDataSize,
    now,
    now,
    input.windowEndsAt,
    input.previousId,
    JSON.stringify(input.validKeys),
    input.carBytes,
    input.deviceFingerprint,
  );
}

export function setVersionState(
  db: Db,
  id: string,
  state: StoredVersionState,
  updatedAt: number,
): void {
  sql(db, 'UPDATE versions SET state = ?, updated_at = ? WHERE id = ?').run(state, updatedAt, id);
}

export function addReceived(db: Db, id: string, bytes: number): void {
  sql(db, 'UPDATE versions SET received_total = received_total + ? WHERE id = ?').run(bytes, id);
}

export function findShard(
  db: Db,
  versionId: string,
  shardCid: string,
): { blocks: number; bytes: number } | undefined {
  return sql<[string, string], { blocks: number; bytes: number }>(
    db,
    'SELECT blocks, bytes FROM shards WHERE version_id = ? AND shard_cid = ?',
  ).get(versionId, shardCid);
}

export function insertShard(
  db: Db,
  versionId: string,
  shardCid: string,
  blocks: number,
  bytes: number,
): void {
  sql(db, 'INSERT INTO shards (version_id, shard_cid, blocks, bytes) VALUES (?, ?, ?, ?)').run(
    versionId,
    shardCid,
    blocks,
    bytes,
  );
}
