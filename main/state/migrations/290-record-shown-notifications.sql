-- The server's warnings and errors a command has shown (shown-notifications.ts): each is shown
-- once, after the backup that first saw it.
CREATE TABLE IF NOT EXISTS shown_notifications (
  id TEXT PRIMARY KEY,
  shown_at INTEGER NOT NULL
) WITHOUT ROWID;
