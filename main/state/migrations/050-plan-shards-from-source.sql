-- Shards planned from the source instead of staged on disk: the upload reads each block again
-- from the file it was packed from, at its offset, and checks it against its CID. An upload's
-- `source_dir` is the folder those paths are relative to; NULL when its shards are staged files.
ALTER TABLE uploads ADD COLUMN source_dir TEXT;

-- The order shards were made in; staged shards sort by file name as before.
ALTER TABLE upload_shards ADD COLUMN position INTEGER NOT NULL DEFAULT 0;

CREATE TABLE upload_blocks (
  version_id TEXT NOT NULL,
  shard_cid TEXT NOT NULL,
  position INTEGER NOT NULL,
  cid TEXT NOT NULL,
  path TEXT NOT NULL,
  offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  PRIMARY KEY (version_id, shard_cid, position),
  FOREIGN KEY (version_id, shard_cid) REFERENCES upload_shards(version_id, shard_cid) ON DELETE CASCADE
) WITHOUT ROWID;
