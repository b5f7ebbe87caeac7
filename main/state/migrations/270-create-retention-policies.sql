-- The retention policy a user set for a bucket on this device (`canopy versions policy`), as
-- JSON: every backup to the bucket from here applies it once its version is stored.
CREATE TABLE IF NOT EXISTS retention_policies (
  bucket_id TEXT PRIMARY KEY,
  policy TEXT NOT NULL
) WITHOUT ROWID;
