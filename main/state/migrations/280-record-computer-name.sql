-- The name this computer goes by in the source labels of its backups (`host:/folder`, §17.3),
-- taken once from its host name and kept: see computer-name.ts.
CREATE TABLE IF NOT EXISTS computer_name (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  name TEXT NOT NULL
);
