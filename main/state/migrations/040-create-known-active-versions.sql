-- The active version of each bucket as last seen from the service, so a bucket's tree can be
-- browsed from the local metadata cache while the service cannot be reached.
CREATE TABLE known_active_versions (
  bucket_id TEXT PRIMARY KEY,
  bucket_name TEXT NOT NULL,
  version_id TEXT NOT NULL,
  seen_at INTEGER NOT NULL
);
