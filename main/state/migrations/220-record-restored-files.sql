-- Files a restore wrote inside the folder a bucket backs up, as the restore left them (size,
-- mtime, inode) with the leaves it wrote into them. The next backup of that folder reads none
-- of those still as they were left: without this, every restored file was new to the file index
-- (its inode differs), and a backup after restoring 100 GB read all 100 GB again.
CREATE TABLE restored_files (
  -- AUTOINCREMENT: a record replaced gets an id above any a backup may have taken already.
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  bucket_id TEXT NOT NULL,
  source_dir TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER NOT NULL,
  mtime_ns TEXT NOT NULL,
  ino TEXT NOT NULL,
  leaves BLOB NOT NULL,
  UNIQUE (bucket_id, source_dir, path)
);
