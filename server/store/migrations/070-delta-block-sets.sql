-- Block sets stored as deltas (§11.6): a version's rows say what it adds to, or removes from,
-- the set of its `set_base`; a version without one holds its whole set. Every set was whole so
-- far, so the rows already written keep their meaning as additions.
--
-- A backup of 100 000 small files copied 100 000 rows for each new version, 11 MB of the
-- database (and as much again in its kept copy), however little had changed.
ALTER TABLE version_blocks ADD COLUMN removed INTEGER NOT NULL DEFAULT 0;

-- The version whose set this one's rows change; NULL: the rows are the whole set.
ALTER TABLE versions ADD COLUMN set_base TEXT;
-- How many versions lie between this one and a whole set, at most: bounds every lookup's walk.
ALTER TABLE versions ADD COLUMN set_depth INTEGER NOT NULL DEFAULT 0;
-- The sum of the sizes of the blocks in the set, kept as it changes (a snapshot's size).
ALTER TABLE versions ADD COLUMN set_bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX versions_by_set_base ON versions(set_base) WHERE set_base IS NOT NULL;

UPDATE versions SET set_bytes = COALESCE((
  SELECT SUM(b.size) FROM version_blocks vb JOIN blocks b ON b.cid = vb.cid
  WHERE vb.version_id = versions.id), 0)
WHERE state IN ('pending', 'active', 'outdated');
