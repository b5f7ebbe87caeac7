-- Blocks are stored in pack files, one per shard, instead of one file per block: a shard of
-- ten thousand small blocks cost ten thousand creates, fsyncs and renames.
-- `bytes` is the pack file's length; `live_bytes` sums the blocks rows that point into it, so
-- garbage collection can delete an empty pack and compact a mostly dead one.
CREATE TABLE packs (
  id TEXT PRIMARY KEY,
  bytes INTEGER NOT NULL,
  live_bytes INTEGER NOT NULL
) WITHOUT ROWID;

-- NULL pack: a block written by an earlier server as a file of its own, still readable.
ALTER TABLE blocks ADD COLUMN pack TEXT;
ALTER TABLE blocks ADD COLUMN pack_offset INTEGER;
CREATE INDEX blocks_by_pack ON blocks(pack) WHERE pack IS NOT NULL;
