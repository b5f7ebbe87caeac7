import { timingSafeEqual } from 'node:crypto';
import { generateEnrollmentCode, hashEnrollmentCode } from '../../main/protocol/index.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';

export function issueEnrollmentCode(
  db: Db,
  userId: string,
  now: number,
  lifetimeMs: number,
): { code: string; expiresAt: number } {
  const code = generateEnrollmentCode();
  const expiresAt = now + lifetimeMs;
  sql(db, 'INSERT INTO enrollment_codes (code_hash, user_id, expires_at) VALUES (?, ?, ?)').run(
    hashEnrollmentCode(code),
    userId,
    expiresAt,
  );
  return { code, expiresAt };
}

/** The user a live code belongs to, or undefined for any unknown, used or expired code. */
export function findLiveCode(
  db: Db,
  input: string,
  now: number,
): { userId: string; hash: string } | undefined {
  const hash = hashEnrollmentCode(input);
  const row = sql<
    [string],
    { code_hash: string; user_id: string; expires_at: number; used_at: number | null }
  >(db, 'SELECT * FROM enrollment_codes WHERE code_hash = ?').get(hash);
  // The index lookup is by hash; compare again in constant time as §16.3 asks.
  if (!row || !timingSafeEqual(Buffer.from(row.code_hash), Buffer.from(hash))) return undefined;
  if (row.used_at !== null || row.expires_at <= now) return undefined;
  return { userId: row.user_id, hash };
}

export function markCodeUsed(db: Db, hash: string, now: number): void {
  sql(db, 'UPDATE enrollment_codes SET used_at = ? WHERE code_hash = ?').run(now, hash);
}
