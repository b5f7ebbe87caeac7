-- Metadata CARs kept as content-defined chunks (blocks/content-chunker.ts), each stored once
-- however many versions' CARs hold it: 16 MB per version of 100 000 files, of which a quarter
-- of a megabyte changes when one file does. Pull puts the pushed bytes back together exactly.

-- A chunk, by the SHA-256 of its bytes: where they lie, and how many places in versions' CARs
-- name it. At 0 refs the row goes.
CREATE TABLE metadata_chunks (
  digest BLOB PRIMARY KEY,
  file TEXT NOT NULL,
  file_offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  refs INTEGER NOT NULL
) WITHOUT ROWID;

-- A file of chunks (metadata/chunks/<id>.chunks), written by the push that first held them, and
-- how many of its chunks are still named: at 0 it is retired.
CREATE TABLE metadata_chunk_files (
  id TEXT PRIMARY KEY,
  live_chunks INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX metadata_chunk_files_dead ON metadata_chunk_files(id) WHERE live_chunks = 0;

-- A version's CAR as the digests of its chunks in order, 32 bytes each. NULL: the CAR was
-- stored whole, as metadata/<id>.car, by a server before chunks.
ALTER TABLE versions ADD COLUMN car_chunks BLOB;
