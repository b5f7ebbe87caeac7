-- Pushes asked for and not yet recorded as a queued upload (or a superseded version): a process
-- killed between the service's answer and that record leaves a pending version no queued
-- upload refers to, which would count toward the quota all it expects until its window ends.
-- Keyed by its metadata CID, which the push names before the service gives the version an id:
-- the next backup of the bucket deletes the pending versions of that CID it has no record of.
CREATE TABLE pushes_in_flight (
  bucket_id TEXT NOT NULL,
  metadata_cid TEXT NOT NULL,
  pushed_at INTEGER NOT NULL,
  PRIMARY KEY (bucket_id, metadata_cid)
);
