-- Users, their enrollment codes and device keys. Times are integer milliseconds (UTC).
CREATE TABLE users (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  email TEXT UNIQUE,
  display_name TEXT,
  locale TEXT,
  profile_image TEXT,
  accepted_tos_at INTEGER,
  account_tax_class TEXT NOT NULL DEFAULT 'unspecified',
  subscription_id TEXT,
  subscription_valid_until TEXT,
  quota_bytes INTEGER,
  -- distinct data-block bytes in the block sets of live versions (kept by block-sets.ts)
  data_bytes INTEGER NOT NULL DEFAULT 0,
  above_80 INTEGER NOT NULL DEFAULT 0,
  above_100 INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);

CREATE TABLE enrollment_codes (
  code_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id),
  expires_at INTEGER NOT NULL,
  used_at INTEGER
);

CREATE TABLE device_keys (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL REFERENCES users(id),
  fingerprint TEXT NOT NULL,
  spki BLOB NOT NULL,
  name TEXT,
  created_at INTEGER NOT NULL,
  last_seen_at INTEGER,
  deleted_at INTEGER
);
-- §4.5: a fingerprint is unique among live keys of the whole service.
CREATE UNIQUE INDEX device_keys_live_fingerprint ON device_keys(fingerprint) WHERE deleted_at IS NULL;
CREATE INDEX device_keys_user ON device_keys(user_id);
