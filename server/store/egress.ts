import type { Db } from './database.ts';
import { sql } from './statements.ts';

function monthOf(now: number): string {
  return new Date(now).toISOString().slice(0, 7);
}

/**
 * Counts bytes served: once per answer, after it went out, outside any transaction (the sync
 * setting below is the connection's, and holds for the transaction a write is part of).
 *
 * The database syncs every commit (synchronous = FULL), because a confirmed shard must survive
 * a power loss. A count of bytes served need not: this commit is not synced itself, and
 * reaches the disk with the next one that is, or the next checkpoint. A power loss may thus
 * forget the last few answers' bytes, never a confirmed upload. Synced, each answer cost this
 * thread a WAL fsync, 2 to 3 ms while a restore kept the disk busy. Returns the rows it changed.
 */
export function addEgress(db: Db, userId: string, bytes: number, now: number): number {
  const statement = sql(
    db,
    `INSERT INTO egress (user_id, month, bytes) VALUES (?, ?, ?)
     ON CONFLICT (user_id, month) DO UPDATE SET bytes = bytes + excluded.bytes`,
  );
  db.pragma('synchronous = NORMAL');
  try {
    return statement.run(userId, monthOf(now), bytes).changes;
  } finally {
    db.pragma('synchronous = FULL');
  }
}

export function monthlyEgress(db: Db, userId: string, now: number): number {
  const row = sql<[string, string], { bytes: number }>(
    db,
    'SELECT bytes FROM egress WHERE user_id = ? AND month = ?',
  ).get(userId, monthOf(now));
  return row?.bytes ?? 0;
}
