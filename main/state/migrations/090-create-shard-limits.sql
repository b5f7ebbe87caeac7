-- The largest shard each bucket's storage host took after refusing a larger one as too large
-- (413, e.g. from a proxy's body limit): the next backups start there instead of being refused
-- again (main/uploader/shard-refusal.ts).
CREATE TABLE shard_limits (
  bucket_id TEXT PRIMARY KEY,
  max_bytes INTEGER NOT NULL,
  learned_at INTEGER NOT NULL
);
