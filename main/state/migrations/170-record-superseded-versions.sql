-- Versions left pending as their upload windows neared their ends, each superseded by a new
-- version that takes over what it received (issue 4: "kill the process at any point and the
-- next run resumes"). Each is deleted on the service once a new version of its bucket holds
-- what it received: left there, it would count toward the quota all it had yet to receive. A
-- run stopped or killed in between leaves the row for the next backup of the bucket.
CREATE TABLE superseded_versions (
  version_id TEXT PRIMARY KEY,
  bucket_id TEXT NOT NULL,
  superseded_at INTEGER NOT NULL
);
CREATE INDEX superseded_versions_by_bucket ON superseded_versions(bucket_id);
