CREATE TABLE versions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  bucket_id TEXT NOT NULL REFERENCES buckets(id),
  user_id TEXT NOT NULL REFERENCES users(id),
  root_cid TEXT NOT NULL,
  metadata_cid TEXT NOT NULL,
  expected_data_size INTEGER NOT NULL,
  received_total INTEGER NOT NULL DEFAULT 0,
  -- pending | active | outdated | upload_failed | deleted
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  window_ends_at INTEGER NOT NULL,
  snapshot_id TEXT,
  previous_id TEXT,
  valid_keys TEXT NOT NULL,
  car_bytes INTEGER NOT NULL,
  device_fingerprint TEXT NOT NULL,
  -- increases each time the version becomes active; orders "most recently active"
  activated_seq INTEGER
);
CREATE INDEX versions_user_state ON versions(user_id, state);
CREATE INDEX versions_bucket_state ON versions(bucket_id, state);
CREATE INDEX versions_pending_window ON versions(window_ends_at) WHERE state = 'pending';
CREATE INDEX versions_failed_window ON versions(window_ends_at) WHERE state = 'upload_failed';

-- Block sets of live (pending, active, outdated) versions only; rows go when a version leaves.
CREATE TABLE version_blocks (
  version_id TEXT NOT NULL,
  cid TEXT NOT NULL,
  PRIMARY KEY (version_id, cid)
) WITHOUT ROWID;

-- Blocks present in the on-disk store; `holders` counts users whose live versions hold it.
CREATE TABLE blocks (
  cid TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  holders INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX blocks_unheld ON blocks(cid) WHERE holders = 0;

-- How many live versions of a user hold a block.
CREATE TABLE user_blocks (
  user_id TEXT NOT NULL,
  cid TEXT NOT NULL,
  refs INTEGER NOT NULL,
  PRIMARY KEY (user_id, cid)
) WITHOUT ROWID;

CREATE TABLE shards (
  version_id TEXT NOT NULL,
  shard_cid TEXT NOT NULL,
  blocks INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (version_id, shard_cid)
) WITHOUT ROWID;

CREATE TABLE snapshots (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  bucket_id TEXT NOT NULL REFERENCES buckets(id),
  version_id TEXT NOT NULL REFERENCES versions(id),
  size INTEGER NOT NULL,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  deleted_at INTEGER
);

CREATE TABLE counters (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('activation', 0);
