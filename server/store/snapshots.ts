import { newUuid, type Snapshot, type SnapshotState } from '../../main/protocol/index.ts';
import { blockSetBytes, blockSetIsStored } from './block-sets.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';
import { unixSeconds } from './time.ts';

interface SnapshotRow {
  id: string;
  bucket_id: string;
  version_id: string;
  size: number;
  state: SnapshotState;
  created_at: number;
}

function toDto(row: SnapshotRow): Snapshot {
  return {
    id: row.id,
    bucket_id: row.bucket_id,
    metadata_id: row.version_id,
    size: row.size,
    state: row.state,
    created_at: unixSeconds(row.created_at),
  };
}

/**
 * Pins a version with a new snapshot. A single host decides the state at once (§12): every
 * entry of the set is in the block store, so `completed`, unless a block went missing.
 */
export function createSnapshot(db: Db, versionId: string, bucketId: string, now: number): Snapshot {
  const id = newUuid();
  const state: SnapshotState = blockSetIsStored(db, versionId) ? 'completed' : 'failed';
  sql(
    db,
    'INSERT INTO snapshots (id, bucket_id, version_id, size, state, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  ).run(id, bucketId, versionId, blockSetBytes(db, versionId), state, now);
  sql(db, 'UPDATE versions SET snapshot_id = ? WHERE id = ?').run(id, versionId);
  const row = sql<[string], SnapshotRow>(db, 'SELECT * FROM snapshots WHERE id = ?').get(id);
  if (!row) throw new Error('snapshot insert lost');
  return toDto(row);
}

export function listSnapshots(db: Db, bucketId: string): Snapshot[] {
  return sql<[string], SnapshotRow>(
    db,
    'SELECT * FROM snapshots WHERE bucket_id = ? AND deleted_at IS NULL ORDER BY seq DESC',
  )
    .all(bucketId)
    .map(toDto);
}

export function findSnapshot(db: Db, bucketId: string, id: string): Snapshot | undefined {
  const row = sql<[string, string], SnapshotRow>(
    db,
    'SELECT * FROM snapshots WHERE bucket_id = ? AND id = ? AND deleted_at IS NULL',
  ).get(bucketId, id);
  return row ? toDto(row) : undefined;
}

export function markSnapshotDeleted(db: Db, snapshot: Snapshot, now: number): void {
  sql(db, 'UPDATE snapshots SET deleted_at = ? WHERE id = ?').run(now, snapshot.id);
  sql(db, 'UPDATE versions SET snapshot_id = NULL WHERE id = ?').run(snapshot.metadata_id);
}

export function markBucketSnapshotsDeleted(db: Db, bucketId: string, now: number): void {
  sql(db, 'UPDATE snapshots SET deleted_at = ? WHERE bucket_id = ? AND deleted_at IS NULL').run(
    now,
    bucketId,
  );
}
