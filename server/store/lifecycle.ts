import { stalePrevious } from '../errors.ts';
import { evaluateQuota } from './accounting.ts';
import { releaseBlockSet } from './block-sets.ts';
import { releaseCarChunks } from './metadata-chunks.ts';
import { findBucketById, markBucketDeleted, setActiveVersion, type BucketRow } from './buckets.ts';
import type { Db } from './database.ts';
import { raiseNotification } from './notifications.ts';
import { createSnapshot, markBucketSnapshotsDeleted } from './snapshots.ts';
import { sql } from './statements.ts';
import { findVersion, setVersionState, type VersionRow } from './versions.ts';

// The version state machine of §10.2: activation, promotion, pruning, deletion, the upload
// window and the retention of failed uploads. Every function runs inside the caller's
// transaction and returns the ids of versions it deleted, whose metadata CARs may be unlinked
// once the transaction has committed.

export interface LifecyclePolicy {
  readonly outdatedVersionsKept: number;
  readonly uploadFailedRetentionMs: number;
}

function requireBucket(db: Db, id: string): BucketRow {
  const bucket = findBucketById(db, id);
  if (!bucket) throw new Error(`bucket ${id} vanished`);
  return bucket;
}

function nextActivationSeq(db: Db): number {
  const row = sql<[], { value: number }>(
    db,
    "UPDATE counters SET value = value + 1 WHERE name = 'activation' RETURNING value",
  ).get();
  if (!row) throw new Error('activation counter missing');
  return row.value;
}

/** Moves a version to `deleted` and drops its block set and its metadata CAR's chunks. */
function removeVersion(db: Db, version: VersionRow, now: number): void {
  const wasLive =
    version.state === 'pending' || version.state === 'active' || version.state === 'outdated';
  setVersionState(db, version.id, 'deleted', now);
  if (wasLive) releaseBlockSet(db, version.id, version.user_id);
  releaseCarChunks(db, version.id);
}

/** Of the bucket's outdated versions without a snapshot, keeps the most recently active few. */
function prune(db: Db, bucketId: string, policy: LifecyclePolicy, now: number): string[] {
  const rows = sql<[string, number], VersionRow>(
    db,
    `SELECT * FROM versions WHERE bucket_id = ? AND state = 'outdated' AND snapshot_id IS NULL
     ORDER BY activated_seq DESC LIMIT -1 OFFSET ?`,
  ).all(bucketId, policy.outdatedVersionsKept);
  for (const row of rows) removeVersion(db, row, now);
  return rows.map((row) => row.id);
}

/**
 * Activates a version (§10.2). With `checkPrevious` its previous_id must still name the
 * bucket's active version, else 409 stale_previous and nothing changes.
 */
export function activate(
  db: Db,
  version: VersionRow,
  checkPrevious: boolean,
  policy: LifecyclePolicy,
  now: number,
): string[] {
  const bucket = requireBucket(db, version.bucket_id);
  if (checkPrevious && version.previous_id !== bucket.active_version_id) throw stalePrevious();
  if (bucket.active_version_id !== null && bucket.active_version_id !== version.id) {
    setVersionState(db, bucket.active_version_id, 'outdated', now);
  }
  setVersionState(db, version.id, 'active', now);
  sql(db, 'UPDATE versions SET activated_seq = ? WHERE id = ?').run(
    nextActivationSeq(db),
    version.id,
  );
  setActiveVersion(db, bucket.id, version.id, now);
  const current = findVersion(db, version.id);
  if (bucket.type === 'backup' && current?.snapshot_id === null) {
    createSnapshot(db, version.id, bucket.id, now);
  }
  const deleted = prune(db, bucket.id, policy, now);
  evaluateQuota(db, version.user_id, now);
  return deleted;
}

/** DELETE of a version by its owner (§10.3); the caller has checked it has no snapshot. */
export function deleteVersion(
  db: Db,
  version: VersionRow,
  policy: LifecyclePolicy,
  now: number,
): string[] {
  removeVersion(db, version, now);
  const deleted = [version.id];
  if (version.state === 'active') {
    setActiveVersion(db, version.bucket_id, null, now);
    const promoted = sql<[string], VersionRow>(
      db,
      `SELECT * FROM versions WHERE bucket_id = ? AND state = 'outdated'
       ORDER BY activated_seq DESC LIMIT 1`,
    ).get(version.bucket_id);
    if (promoted) deleted.push(...activate(db, promoted, false, policy, now));
  }
  evaluateQuota(db, version.user_id, now);
  return deleted;
}

/** After a snapshot is deleted its version, if outdated, is subject to pruning at once. */
export function pruneBucket(
  db: Db,
  bucketId: string,
  userId: string,
  policy: LifecyclePolicy,
  now: number,
): string[] {
  const deleted = prune(db, bucketId, policy, now);
  if (deleted.length > 0) evaluateQuota(db, userId, now);
  return deleted;
}

export function deleteBucket(db: Db, bucket: BucketRow, now: number): string[] {
  const versions = sql<[string], VersionRow>(
    db,
    "SELECT * FROM versions WHERE bucket_id = ? AND state != 'deleted' ORDER BY seq DESC",
  ).all(bucket.id);
  // Newest first: a version goes after those built on it, so none is handed its block set.
  for (const version of versions) removeVersion(db, version, now);
  markBucketSnapshotsDeleted(db, bucket.id, now);
  markBucketDeleted(db, bucket.id, now);
  raiseNotification(
    db,
    {
      userId: bucket.owner_id,
      messageKey: 'bucket_deleted',
      severity: 'info',
      dismissable: true,
      message: `The bucket "${bucket.name}" was deleted.`,
    },
    now,
  );
  evaluateQuota(db, bucket.owner_id, now);
  return versions.map((version) => version.id);
}

/**
 * Records pending versions whose upload window is over as `upload_failed` (updated_at = end of
 * the window) and deletes failed ones past their retention. Runs before every request, so state
 * read from the clock and state recorded never disagree, and on a timer (the sweep).
 */
export function sweepUploadWindows(db: Db, policy: LifecyclePolicy, now: number): string[] {
  const expired = sql<[number], VersionRow>(
    db,
    "SELECT * FROM versions WHERE state = 'pending' AND window_ends_at <= ?",
  ).all(now);
  const touchedUsers = new Set<string>();
  for (const version of expired) {
    setVersionState(db, version.id, 'upload_failed', version.window_ends_at);
    releaseBlockSet(db, version.id, version.user_id);
    touchedUsers.add(version.user_id);
    raiseNotification(
      db,
      {
        userId: version.user_id,
        messageKey: 'upload_window_expired',
        severity: 'warning',
        dismissable: true,
        message: 'A backup upload did not finish in time and was abandoned.',
      },
      now,
    );
  }
  const retired = sql<[number], VersionRow>(
    db,
    "SELECT * FROM versions WHERE state = 'upload_failed' AND window_ends_at <= ?",
  ).all(now - policy.uploadFailedRetentionMs);
  for (const version of retired) {
    setVersionState(db, version.id, 'deleted', now);
    releaseCarChunks(db, version.id);
    touchedUsers.add(version.user_id);
  }
  for (const userId of touchedUsers) evaluateQuota(db, userId, now);
  return retired.map((version) => version.id);
}

export function hasDueVersions(db: Db, policy: LifecyclePolicy, now: number): boolean {
  return (
    sql(db, "SELECT 1 FROM versions WHERE state = 'pending' AND window_ends_at <= ? LIMIT 1").get(
      now,
    ) !== undefined ||
    sql(
      db,
      "SELECT 1 FROM versions WHERE state = 'upload_failed' AND window_ends_at <= ? LIMIT 1",
    ).get(now - policy.uploadFailedRetentionMs) !== undefined
  );
}
