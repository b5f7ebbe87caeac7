-- Each indexed file's leaves: their SHA-256 digests one after another (main/packer/leaf-list.ts).
-- An unchanged file's leaves then come from its row, and a backup no longer holds the previous
-- version's File nodes in memory to find them. Rows from before have none (NULL); a source
-- whose rows all have them says so in `leaves_recorded`, and until then a backup still reads
-- the previous version's nodes.
ALTER TABLE file_index ADD COLUMN leaves BLOB;
ALTER TABLE file_index_staged ADD COLUMN leaves BLOB;
ALTER TABLE file_index_sources ADD COLUMN leaves_recorded INTEGER NOT NULL DEFAULT 0;
