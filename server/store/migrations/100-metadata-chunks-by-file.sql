-- The chunks of one file, in the order they lie in it: what compacting the file reads
-- (blocks/chunk-file-compaction.ts), without a scan of every chunk.
CREATE INDEX metadata_chunks_by_file ON metadata_chunks(file, file_offset);
