import type { StateDb } from './database.ts';

// The persisted upload queue. The storage authorization is a credential: it lives here only
// while its upload is in flight (it expires with the upload window), never in logs.

export interface QueuedUpload {
  version_id: string;
  bucket_id: string;
  storage_host: string;
  storage_authorization: string;
  staging_dir: string;
  files: number;
  bytes_scanned: number;
  new_bytes: number;
  created_at: number;
}

export interface QueuedShard {
  shard_cid: string;
  file: string;
  bytes: number;
  needed: number;
  confirmed: number;
}

export interface UploadQueue {
  record(
    upload: QueuedUpload,
    shards: ReadonlyArray<{ shardCid: string; file: string; bytes: number; needed: boolean }>,
  ): void;
  confirm(versionId: string, shardCid: string): void;
  pendingFor(bucketId: string): QueuedUpload | undefined;
  shardsOf(versionId: string): QueuedShard[];
  finish(versionId: string): void;
  /** The staging folders of every queued upload. */
  stagingDirs(): Set<string>;
}

export function uploadQueue(db: StateDb): UploadQueue {
  return {
    record(upload, shards) {
      db.transaction(() => {
        db.prepare(
          `INSERT INTO uploads (version_id, bucket_id, storage_host, storage_authorization, staging_dir, files,
             bytes_scanned, new_bytes, created_at)
           VALUES (@version_id, @bucket_id, @storage_host, @storage_authorization, @staging_dir, @files,
             @bytes_scanned, @new_bytes, @created_at)`,
        ).run(upload);
        const insert = db.prepare(
          'INSERT INTO upload_shards (version_id, shard_cid, file, bytes, needed) VALUES (?, ?, ?, ?, ?)',
        );
        for (const shard of shards)
          insert.run(
            upload.version_id,
            shard.shardCid,
            shard.file,
            shard.bytes,
            shard.needed ? 1 : 0,
          );
      })();
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
          'SELECT shard_cid, file, bytes, needed, confirmed FROM upload_shards WHERE version_id = ? ORDER BY file',
        )
        .all(versionId);
    },
    finish(versionId) {
      db.prepare('DELETE FROM uploads WHERE version_id = ?').run(versionId);
    },
    stagingDirs() {
      return new Set(
        db
          .prepare<[], { staging_dir: string }>('SELECT staging_dir FROM uploads')
          .all()
          .map((row) => row.staging_dir),
      );
    },
  };
}
