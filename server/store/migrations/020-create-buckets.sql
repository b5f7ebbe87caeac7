CREATE TABLE buckets (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  owner_id TEXT NOT NULL REFERENCES users(id),
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  storage_class TEXT NOT NULL,
  replicas INTEGER NOT NULL DEFAULT 1,
  updated_at INTEGER NOT NULL,
  active_version_id TEXT,
  deleted_at INTEGER
);
CREATE UNIQUE INDEX buckets_live_name ON buckets(owner_id, name) WHERE deleted_at IS NULL;

CREATE TABLE bucket_keys (
  id TEXT PRIMARY KEY,
  bucket_id TEXT NOT NULL REFERENCES buckets(id),
  fingerprint TEXT NOT NULL,
  spki BLOB NOT NULL,
  approved INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
