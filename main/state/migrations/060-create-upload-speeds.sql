-- The speed each bucket's uploads last achieved, smoothed over backups: it sizes the next
-- backup's shards (main/uploader/shard-target.ts).
CREATE TABLE upload_speeds (
  bucket_id TEXT PRIMARY KEY,
  bytes_per_second REAL NOT NULL,
  observed_at INTEGER NOT NULL
);
