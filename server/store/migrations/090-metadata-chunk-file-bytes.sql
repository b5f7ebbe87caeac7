-- What a file of metadata chunks holds, and how much of it is still named, so that a file
-- whose chunks mostly went with the versions that named them is rewritten with the live ones
-- alone (blocks/chunk-file-compaction.ts), as sparse packs are. A file keeps its dead bytes
-- until its last chunk goes otherwise: the first version's CAR whole, for as long as any
-- later version shares one chunk of it.
--
-- Files written before this migration count as whole: the chunks they lost before are not
-- known any more, and their files are rewritten once as much again goes.
ALTER TABLE metadata_chunk_files ADD COLUMN total_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE metadata_chunk_files ADD COLUMN live_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE metadata_chunk_files SET live_bytes = (
  SELECT COALESCE(SUM(length), 0) FROM metadata_chunks WHERE metadata_chunks.file = metadata_chunk_files.id
);
UPDATE metadata_chunk_files SET total_bytes = live_bytes;
