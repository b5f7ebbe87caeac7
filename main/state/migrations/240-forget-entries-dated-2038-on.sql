-- Nodes packed before the fix in main/packer/unixfs-data.ts carry a time from 2^31 to 2^32 - 1
-- seconds (2038-01-19 03:14:08 UTC to 2106-02-07) as 1970. The file index lets a backup reuse a
-- file's or folder's node while it is unchanged, so such a node would have gone on, wrong,
-- into every later version: its entries go, and the next backup reads those files and makes
-- those folders' nodes anew. Times are decimal text; CAST reads them as 64-bit integers.
DELETE FROM file_index
WHERE CAST(mtime_ns AS INTEGER) >= 2147483648000000000
  AND CAST(mtime_ns AS INTEGER) < 4294967296000000000;
DELETE FROM file_index_staged
WHERE CAST(mtime_ns AS INTEGER) >= 2147483648000000000
  AND CAST(mtime_ns AS INTEGER) < 4294967296000000000;
UPDATE file_index_sources
SET entry_count = (SELECT count(*) FROM file_index WHERE source_id = file_index_sources.id);
