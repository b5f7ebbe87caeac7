import type { StateDb } from './database.ts';
import { startShardPlan, type ShardPlan } from './shard-plan.ts';

// The persisted upload queue. The storage authorization is a credential: it lives here only
// while its upload is in flight (it expires with the upload window), never in logs.

export interface QueuedUpload {
  version_id: string;
  bucket_id: string;
  storage_host: string;
  storage_authorization: string;
  /** Where staged shards are; '' when the shards are planned from the source. */
  staging_dir: string;
  /** The folder planned shards are read from again; null when the shards are staged. */
  source_dir: string | null;
  /**
   * The pushed metadata CAR's file, kept while the upload is queued; null for an upload queued
   * before it was kept.
   */
  metadata_file: string | null;
  /** The fields the version was pushed with, as JSON (backup-source.ts `PushedAs`); or null. */
  pushed_as: string | null;
  files: number;
  bytes_scanned: number;
  new_bytes: number;
  created_at: number;
}

export interface QueuedShard {
  shard_cid: string;
  /** The staged shard file; '' for a shard planned from the source. */
  file: string;
  bytes: number;
  needed: number;
  confirmed: number;
}

/** One block of a shard planned from the source: where to read it again. */
export interface QueuedBlock {
  readonly cid: string;
  readonly path: string;
  readonly offset: number;
  readonly length: number;
}

interface BlockOfShard {
  readonly shard_cid: string;
  readonly position: number;
  readonly cid: string;
}

export interface ShardToQueue {
  readonly shardCid: string;
  /** The staged file, or '' for a shard planned from the source (its blocks are in a plan). */
  readonly file: string;
  readonly bytes: number;
  readonly needed: boolean;
}

export interface UploadQueue {
  /**
   * Records a pushed version and its shards. Shards planned from the source take their blocks
   * from `plan`, the shard numbered i there being `shards[i]`, when they are needed; the plan
   * goes in the same transaction.
   */
  record(upload: QueuedUpload, shards: readonly ShardToQueue[], plan?: ShardPlan): void;
  /** A new plan for the shards of the next upload to `bucketId` (startShardPlan). */
  startPlan(bucketId: string): ShardPlan;
  confirm(versionId: string, shardCid: string): void;
  pendingFor(bucketId: string): QueuedUpload | undefined;
  shardsOf(versionId: string): QueuedShard[];
  /**
   * Up to `count` blocks of a shard planned from the source, in order from `from` (0 is its
   * first block); fewer only at its end. A shard of small files holds hundreds of thousands.
   */
  blocksOf(versionId: string, shardCid: string, from: number, count: number): QueuedBlock[];
  finish(versionId: string): void;
  /**
   * Finishes the upload of `versionId`, left pending for a new version to take over what it
   * received, and records it as superseded until `forgetSuperseded`.
   */
  supersede(versionId: string, at: number): void;
  /**
   * Every block of the shards of `versionId` planned from the source that the host needed,
   * and its shard; read a page at a time, as an upload may have a million.
   */
  blocksOfUpload(versionId: string): Iterable<{ readonly shard_cid: string; readonly cid: string }>;
  /**
   * Queues `upload`, the version `fromVersionId` goes on as, with the same shards, those in
   * `needed` to be sent, and supersedes `fromVersionId` (supersede), in one transaction.
   */
  carryOver(
    fromVersionId: string,
    upload: QueuedUpload,
    needed: ReadonlySet<string>,
    at: number,
  ): void;
  /** Records `versionId`, of no queued upload, as superseded (supersede). */
  recordSuperseded(versionId: string, bucketId: string, at: number): void;
  /** The versions of `bucketId` superseded and not yet deleted on the service. */
  supersededIn(bucketId: string): string[];
  forgetSuperseded(versionId: string): void;
  /**
   * Notes a push of the metadata CAR `metadataCid` to `bucketId` about to be made, until
   * `forgetPush`: should the process die before its version is recorded (queued, or
   * superseded), the next backup finds it pending on the service and deletes it.
   */
  notePush(bucketId: string, metadataCid: string, at: number): void;
  /** The metadata CIDs of `bucketId`'s pushes noted and not forgotten (notePush). */
  pushesIn(bucketId: string): string[];
  forgetPush(bucketId: string, metadataCid: string): void;
  /** The versions of every queued upload, and every superseded one: those a record refers to. */
  recordedVersions(): Set<string>;
  /** The staging folders, and the metadata CARs' files, of every queued upload. */
  stagingDirs(): Set<string>;
}

function insertUpload(db: StateDb, upload: QueuedUpload): void {
  db.prepare(
    `INSERT INTO uploads (version_id, bucket_id, storage_host, storage_authorization, staging_dir,
       source_dir, files, bytes_scanned, new_bytes, created_at, metadata_file, pushed_as)
     VALUES (@version_id, @bucket_id, @storage_host, @storage_authorization, @staging_dir,
       @source_dir, @files, @bytes_scanned, @new_bytes, @created_at, @metadata_file, @pushed_as)`,
  ).run(upload);
}

export function uploadQueue(db: StateDb): UploadQueue {
  const queue: UploadQueue = {
    record(upload, shards, plan) {
      plan?.flush();
      db.transaction(() => {
        insertUpload(db, upload);
        const insert = db.prepare(
          'INSERT INTO upload_shards (version_id, shard_cid, file, bytes, needed, position) VALUES (?, ?, ?, ?, ?, ?)',
        );
        const copyPlanned = db.prepare(
          `INSERT INTO upload_blocks (version_id, shard_cid, position, cid, path, offset, length)
           SELECT ?, ?, position, cid, path, offset, length FROM planned_blocks
           WHERE plan_id = ? AND shard = ?`,
        );
        shards.forEach((shard, position) => {
          insert.run(
            upload.version_id,
            shard.shardCid,
            shard.file,
            shard.bytes,
            shard.needed ? 1 : 0,
            position,
          );
          // A shard the host does not need is never read again; its plan would be dead weight.
          if (shard.needed && shard.file === '' && plan)
            copyPlanned.run(upload.version_id, shard.shardCid, plan.id, position);
        });
        if (plan) db.prepare('DELETE FROM shard_plans WHERE id = ?').run(plan.id);
      }).immediate();
    },
    startPlan(bucketId) {
      return startShardPlan(db, bucketId);
    },
    confirm(versionId, shardCid) {
      db.prepare(
        'UPDATE upload_shards SET confirmed = 1 WHERE version_id = ? AND shard_cid = ?',
      ).run(versionId, shardCid);
    },
    pendingFor(bucketId) {
      return db
        .prepare<[string], QueuedUpload>(
          'SELECT * FROM uploads WHERE bucket_id = ? ORDER BY created_at LIMIT 1',
        )
        .get(bucketId);
    },
    shardsOf(versionId) {
      return db
        .prepare<[string], QueuedShard>(
          'SELECT shard_cid, file, bytes, needed, confirmed FROM upload_shards WHERE version_id = ? ORDER BY position, file',
        )
        .all(versionId);
    },
    blocksOf(versionId, shardCid, from, count) {
      return db
        .prepare<[string, string, number, number], QueuedBlock>(
          `SELECT cid, path, offset, length FROM upload_blocks
           WHERE version_id = ? AND shard_cid = ? AND position >= ? ORDER BY position LIMIT ?`,
        )
        .all(versionId, shardCid, from, count);
    },
    finish(versionId) {
      db.prepare('DELETE FROM uploads WHERE version_id = ?').run(versionId);
    },
    supersede(versionId, at) {
      db.transaction(() => {
        db.prepare(
          `INSERT OR IGNORE INTO superseded_versions (version_id, bucket_id, superseded_at)
           SELECT version_id, bucket_id, ? FROM uploads WHERE version_id = ?`,
        ).run(at, versionId);
        db.prepare('DELETE FROM uploads WHERE version_id = ?').run(versionId);
      }).immediate();
    },
    *blocksOfUpload(versionId) {
      const page = db.prepare<[string, string, number, string, number], BlockOfShard>(
        `SELECT shard_cid, position, cid FROM upload_blocks
         WHERE version_id = ? AND (shard_cid, position) > (?, ?) AND shard_cid >= ?
         ORDER BY shard_cid, position LIMIT ?`,
      );
      let after = { shard_cid: '', position: -1 };
      for (;;) {
        const rows = page.all(versionId, after.shard_cid, after.position, after.shard_cid, 10_000);
        yield* rows;
        const last = rows.at(-1);
        if (!last || rows.length < 10_000) return;
        after = last;
      }
    },
    carryOver(fromVersionId, upload, needed, at) {
      const insertShard = db.prepare(
        `INSERT INTO upload_shards (version_id, shard_cid, file, bytes, needed, position)
         SELECT ?, shard_cid, file, bytes, ?, position FROM upload_shards
         WHERE version_id = ? AND shard_cid = ?`,
      );
      const copyBlocks = db.prepare(
        `INSERT INTO upload_blocks (version_id, shard_cid, position, cid, path, offset, length)
         SELECT ?, shard_cid, position, cid, path, offset, length FROM upload_blocks
         WHERE version_id = ? AND shard_cid = ?`,
      );
      db.transaction(() => {
        insertUpload(db, upload);
        for (const { shard_cid: shardCid } of queue.shardsOf(fromVersionId)) {
          const isNeeded = needed.has(shardCid);
          insertShard.run(upload.version_id, isNeeded ? 1 : 0, fromVersionId, shardCid);
          // A shard not sent again is never read again; its blocks would be dead weight.
          if (isNeeded) copyBlocks.run(upload.version_id, fromVersionId, shardCid);
        }
        queue.supersede(fromVersionId, at);
      }).immediate();
    },
    recordSuperseded(versionId, bucketId, at) {
      db.prepare(
        'INSERT OR IGNORE INTO superseded_versions (version_id, bucket_id, superseded_at) VALUES (?, ?, ?)',
      ).run(versionId, bucketId, at);
    },
    supersededIn(bucketId) {
      return db
        .prepare<[string], string>(
          'SELECT version_id FROM superseded_versions WHERE bucket_id = ? ORDER BY superseded_at',
        )
        .pluck()
        .all(bucketId);
    },
    forgetSuperseded(versionId) {
      db.prepare('DELETE FROM superseded_versions WHERE version_id = ?').run(versionId);
    },
    notePush(bucketId, metadataCid, at) {
      db.prepare(
        'INSERT OR REPLACE INTO pushes_in_flight (bucket_id, metadata_cid, pushed_at) VALUES (?, ?, ?)',
      ).run(bucketId, metadataCid, at);
    },
    pushesIn(bucketId) {
      return db
        .prepare<[string], string>(
          'SELECT metadata_cid FROM pushes_in_flight WHERE bucket_id = ? ORDER BY pushed_at',
        )
        .pluck()
        .all(bucketId);
    },
    forgetPush(bucketId, metadataCid) {
      db.prepare('DELETE FROM pushes_in_flight WHERE bucket_id = ? AND metadata_cid = ?').run(
        bucketId,
        metadataCid,
      );
    },
    recordedVersions() {
      return new Set(
        db
          .prepare<[], string>(
            'SELECT version_id FROM uploads UNION SELECT version_id FROM superseded_versions',
          )
          .pluck()
          .all(),
      );
    },
    stagingDirs() {
      const kept = new Set<string>();
      for (const row of db
        .prepare<[], { staging_dir: string; metadata_file: string | null }>(
          'SELECT staging_dir, metadata_file FROM uploads',
        )
        .all()) {
        kept.add(row.staging_dir);
        if (row.metadata_file !== null) kept.add(row.metadata_file);
      }
      return kept;
    },
  };
  return queue;
}
