-- A backup's entries for the file index, written as it packs them rather than held in memory
-- until the version is stored (a tree of 100 000 files held about 22 MB of them). Once the
-- version is stored they replace the source's entries, in one transaction.
CREATE TABLE file_index_stages (
  id INTEGER PRIMARY KEY,
  bucket_id TEXT NOT NULL,
  source_dir TEXT NOT NULL
);

-- file_index's columns, under a stage instead of a source.
CREATE TABLE file_index_staged (
  stage_id INTEGER NOT NULL REFERENCES file_index_stages(id) ON DELETE CASCADE,
  path TEXT NOT NULL,
  dir TEXT,
  kind TEXT NOT NULL CHECK (kind IN ('file', 'directory', 'symlink')),
  size INTEGER NOT NULL,
  mtime_ns TEXT NOT NULL,
  ino TEXT NOT NULL,
  mode INTEGER NOT NULL,
  target TEXT,
  cid TEXT,
  PRIMARY KEY (stage_id, path)
) WITHOUT ROWID;
