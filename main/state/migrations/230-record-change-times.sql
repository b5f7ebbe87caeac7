-- When each entry's inode last changed (ctime), beside its mtime. A file whose bytes change
-- while its size stays and its mtime is set back (npm writes every package file with the same
-- mtime of 1985; tar, rsync and cp -p set the mtime they copy) kept its size, mtime and inode,
-- and the file index vouched for its old bytes: the backup said nothing changed, and a restore
-- gave the old file back. Its ctime, which no program can set, moved. As restic and borg do, a
-- file is vouched for only while its ctime is as recorded too. Rows from before have none: their
-- files are read once more by the next backup, which records it.
ALTER TABLE file_index ADD COLUMN ctime_ns TEXT;
ALTER TABLE file_index_staged ADD COLUMN ctime_ns TEXT;
ALTER TABLE restored_files ADD COLUMN ctime_ns TEXT;
