-- The blocks of a backup's planned shards, written as they are planned rather than held in
-- memory until the version is pushed (400 000 small files held about 70 MB of heap for them).
-- Once the upload is recorded, the blocks of the shards the host needs move to upload_blocks
-- and the plan goes, in the same transaction. A plan left by a killed backup goes when the next backup
-- to the same bucket starts one.
CREATE TABLE shard_plans (
  id INTEGER PRIMARY KEY,
  bucket_id TEXT NOT NULL
);

-- upload_blocks' columns, under a plan and its shard's number instead of a version and a CID.
CREATE TABLE planned_blocks (
  plan_id INTEGER NOT NULL REFERENCES shard_plans(id) ON DELETE CASCADE,
  shard INTEGER NOT NULL,
  position INTEGER NOT NULL,
  cid TEXT NOT NULL,
  path TEXT NOT NULL,
  offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  PRIMARY KEY (plan_id, shard, position)
) WITHOUT ROWID;
