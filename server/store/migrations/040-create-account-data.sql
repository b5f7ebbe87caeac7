CREATE TABLE notifications (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL REFERENCES users(id),
  dismissable INTEGER NOT NULL,
  message TEXT NOT NULL,
  message_key TEXT NOT NULL,
  severity TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX notifications_user ON notifications(user_id);

CREATE TABLE invoices (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL REFERENCES users(id),
  billing_start INTEGER NOT NULL,
  billing_end INTEGER NOT NULL,
  subscription_id TEXT,
  total_amount INTEGER NOT NULL,
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX invoices_user ON invoices(user_id);

-- Bytes the storage host served per user and UTC calendar month ('YYYY-MM').
CREATE TABLE egress (
  user_id TEXT NOT NULL,
  month TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (user_id, month)
) WITHOUT ROWID;
