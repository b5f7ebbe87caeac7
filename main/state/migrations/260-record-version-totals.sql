-- What each version holds, as its manifest states it (§17.3): its regular files and their bytes,
-- noted whenever this device reads a version's metadata or stores a version, for `canopy
-- versions` to show without fetching every version's list of files.
CREATE TABLE IF NOT EXISTS version_totals (
  version_id TEXT PRIMARY KEY,
  file_count INTEGER NOT NULL,
  total_bytes INTEGER NOT NULL
) WITHOUT ROWID;
