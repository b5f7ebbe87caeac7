-- Uploads in flight, written before the step they describe (ARCHITECTURE.md, durability): a
-- version is recorded once pushed (with its storage authorization, which no endpoint returns
-- again), each shard once the host confirmed it; the rows go when complete succeeded.
CREATE TABLE uploads (
  version_id TEXT PRIMARY KEY,
  bucket_id TEXT NOT NULL,
  storage_host TEXT NOT NULL,
  storage_authorization TEXT NOT NULL,
  staging_dir TEXT NOT NULL,
  files INTEGER NOT NULL,
  bytes_scanned INTEGER NOT NULL,
  new_bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE TABLE upload_shards (
  version_id TEXT NOT NULL REFERENCES uploads(version_id) ON DELETE CASCADE,
  shard_cid TEXT NOT NULL,
  file TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  -- 1 when it carries a block the host reported missing
  needed INTEGER NOT NULL,
  confirmed INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (version_id, shard_cid)
);
