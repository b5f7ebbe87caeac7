-- Blocks a restore or a verify found the host could not give back whole (sent damaged, or no
-- longer held), per bucket: the next backup of the bucket sends each again if its source still
-- has it, since the host would otherwise count its copy held and never ask for it. Dropped once
-- a backup has sent it, or has found its source no longer has it.
CREATE TABLE blocks_to_resend (
  bucket_id TEXT NOT NULL,
  cid TEXT NOT NULL,
  found_at INTEGER NOT NULL,
  PRIMARY KEY (bucket_id, cid)
);
