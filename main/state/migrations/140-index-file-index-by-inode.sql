-- A file whose folder was renamed or moved keeps its inode, name, size and mtime, but not its
-- path, which the index is keyed by. Found by its inode, it reuses its leaves instead of being
-- read again: a user who reorganises a photo library would otherwise have every photo read.
CREATE INDEX file_index_by_ino ON file_index (source_id, ino);
