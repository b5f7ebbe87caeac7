-- A bucket whose active version's metadata CAR a verify found damaged on the server: the next
-- backup of the bucket stores a new version of the same tree even when nothing changed, so that
-- the bucket's active version can be browsed and restored from the server again.
CREATE TABLE metadata_to_store_again (
  bucket_id TEXT PRIMARY KEY,
  version_id TEXT NOT NULL,
  found_at INTEGER NOT NULL
);
