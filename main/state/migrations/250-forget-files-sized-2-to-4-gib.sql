-- File nodes packed before the fix in main/packer/unixfs-data.ts give a size from 2^31 to
-- 2^32 - 1 bytes as 0: a file of 2 to 4 GiB, and in a file over 1 TiB the node over its last
-- part when that part is 2 to 4 GiB (the balanced layout's nodes below the root hold 1 GiB, then
-- 1 TiB). Canopy reads a file's size from its block sizes, but another UnixFS tool reads that
-- field. The index entries of such files go, so the next backup makes their nodes anew.
DELETE FROM file_index
WHERE kind = 'file'
  AND size % 1099511627776 >= 2147483648
  AND size % 1099511627776 < 4294967296;
DELETE FROM file_index_staged
WHERE kind = 'file'
  AND size % 1099511627776 >= 2147483648
  AND size % 1099511627776 < 4294967296;
UPDATE file_index_sources
SET entry_count = (SELECT count(*) FROM file_index WHERE source_id = file_index_sources.id);
