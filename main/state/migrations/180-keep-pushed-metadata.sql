-- What a queued upload was pushed with, so that a run resuming it can go on as a new version of
-- the same tree when its upload window nears its end, without packing the source anew: the
-- metadata CAR's file (in the staging folder, kept while the upload is queued) and the push's
-- fields as JSON (root and metadata CIDs, expected data size, previous version, deleted
-- blocks). NULL for uploads queued before, which are packed anew.
ALTER TABLE uploads ADD COLUMN metadata_file TEXT;
ALTER TABLE uploads ADD COLUMN pushed_as TEXT;
