-- Each bucket's list of versions as last seen from the service, so `canopy versions` still
-- answers while the service cannot be reached (its backup disk unplugged, the network down).
-- The list is the service's JSON, newest first.
CREATE TABLE known_versions (
  bucket_id TEXT PRIMARY KEY,
  bucket_name TEXT NOT NULL,
  versions_json TEXT NOT NULL,
  seen_at INTEGER NOT NULL
);
