-- Each indexed folder's node: `cid` (until now a file's File node only) and, here, the node's
-- Tsize as its parent links to it. A backup that finds a folder and everything under it as the
-- index describes reuses that node instead of walking the folder again (one changed file among
-- 100 000 cost 8-9 s, most of it walking, looking up and packing again what had not changed).
-- Rows from before have none (NULL): such a folder is walked as before, and its row gets them.
ALTER TABLE file_index ADD COLUMN node_size INTEGER;
ALTER TABLE file_index_staged ADD COLUMN node_size INTEGER;
