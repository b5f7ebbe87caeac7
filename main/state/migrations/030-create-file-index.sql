-- The file index (§17, issue 4): what each entry of a source looked like when it was last
-- backed up, so an unchanged file (same size, mtime and inode) reuses its chunks instead of
-- being read again, and a wholly unchanged source is recognised without packing it. One row
-- set per (bucket, source folder); `version_id` is the version it describes, and a file's
-- chunks are only reused when that version's tree really holds its File node.
CREATE TABLE file_index_sources (
  id INTEGER PRIMARY KEY,
  bucket_id TEXT NOT NULL,
  source_dir TEXT NOT NULL,
  version_id TEXT NOT NULL,
  entry_count INTEGER NOT NULL,
  UNIQUE (bucket_id, source_dir)
);

CREATE TABLE file_index (
  source_id INTEGER NOT NULL REFERENCES file_index_sources(id) ON DELETE CASCADE,
  -- relative to the source folder, '/' separators, exactly as scanned (no normalization);
  -- '' is the source folder itself
  path TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('file', 'directory', 'symlink')),
  size INTEGER NOT NULL,
  -- nanoseconds and inode numbers exceed 2^53: kept as decimal text, compared exactly
  mtime_ns TEXT NOT NULL,
  ino TEXT NOT NULL,
  mode INTEGER NOT NULL,
  -- a symlink's target
  target TEXT,
  -- a file's UnixFS File node
  cid TEXT,
  PRIMARY KEY (source_id, path)
) WITHOUT ROWID;
