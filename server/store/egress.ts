import type { Db } from './database.ts';
import { sql } from './statements.ts';

function monthOf(now: number): string {
  return new Date(now).toISOString().slice(0, 7);
}

export function addEgress(db: Db, userId: string, bytes: number, now: number): void {
  sql(
    db,
    `INSERT INTO egress (user_id, month, bytes) VALUES (?, ?, ?)
     ON CONFLICT (user_id, month) DO UPDATE SET bytes = bytes + excluded.bytes`,
  ).run(userId, monthOf(now), bytes);
}

export function monthlyEgress(db: Db, userId: string, now: number): number {
  const row = sql<[string, string], { bytes: number }>(
    db,
    'SELECT bytes FROM egress WHERE user_id = ? AND month = ?',
  ).get(userId, monthOf(now));
  return row?.bytes ?? 0;
}
