import type { Db } from './database.ts';
import { sql } from './statements.ts';

// The reference counts behind usage and garbage collection (§11.6).
// - user_blocks.refs: how many rows of a user's live versions add a block to their sets
//   (version_blocks rows with removed = 0, block-sets.ts). A block is "held" by the user while
//   refs > 0: a set holds a block only if some version of its chain adds it, and each live
//   version's chain is made of live versions.
// - users.data_bytes: the sizes of the blocks the user holds, each once.
// - blocks.holders: how many users hold a block; at 0 it may be garbage-collected.
// Every function runs inside the caller's transaction, which is also the GC's lock.

/** Counts one more adding row of `cid` for the user. */
export function countAddition(db: Db, userId: string, cid: string): void {
  const row = sql<[string, string], { refs: number }>(
    db,
    `INSERT INTO user_blocks (user_id, cid, refs) VALUES (?, ?, 1)
     ON CONFLICT (user_id, cid) DO UPDATE SET refs = refs + 1 RETURNING refs`,
  ).get(userId, cid);
  if (row?.refs === 1) {
    sql(db, 'UPDATE blocks SET holders = holders + 1 WHERE cid = ?').run(cid);
    sql(
      db,
      'UPDATE users SET data_bytes = data_bytes + (SELECT size FROM blocks WHERE cid = ?) WHERE id = ?',
    ).run(cid, userId);
  }
}

/**
 * Counts one more adding row for each block in `temp.copied_additions`, which the caller
 * filled with blocks the user holds already (their rows were copied from a live version's),
 * and empties it. Returns those the counts missed, which the caller counts the long way
 * (countAddition): a database that somehow lost a count must not lose the block.
 */
export function countCopiedAdditions(db: Db, userId: string): string[] {
  const copied = sql<[], number>(db, 'SELECT COUNT(*) FROM temp.copied_additions').pluck().get();
  const counted = sql(
    db,
    `UPDATE user_blocks SET refs = refs + 1
     WHERE user_id = ? AND refs > 0 AND cid IN (SELECT cid FROM temp.copied_additions)`,
  ).run(userId).changes;
  // Every one counted: none to look for (a scan of them all, 0.25 s of a push on 400 000).
  const missed =
    counted === copied
      ? []
      : sql<[string], string>(
          db,
          `SELECT cid FROM temp.copied_additions AS copied WHERE NOT EXISTS (
             SELECT 1 FROM user_blocks WHERE user_id = ? AND cid = copied.cid AND refs > 0)`,
        )
          .pluck()
          .all(userId);
  sql(db, 'DELETE FROM temp.copied_additions').run();
  return missed;
}

/** The table countCopiedAdditions reads, created once per connection. */
export function prepareCopiedAdditions(db: Db): void {
  db.exec('CREATE TEMP TABLE IF NOT EXISTS copied_additions (cid TEXT PRIMARY KEY) WITHOUT ROWID');
}

/** Counts one adding row fewer for each of `cids`; a block no longer held frees its bytes. */
export function uncountAdditions(db: Db, userId: string, cids: Iterable<string>): void {
  const lower = sql<[string, string], { refs: number; size: number | null }>(
    db,
    `UPDATE user_blocks SET refs = refs - 1 WHERE user_id = ? AND cid = ?
     RETURNING refs, (SELECT size FROM blocks WHERE blocks.cid = user_blocks.cid) AS size`,
  );
  for (const cid of cids) {
    const row = lower.get(userId, cid);
    if (row?.refs !== 0) continue;
    sql(db, 'DELETE FROM user_blocks WHERE user_id = ? AND cid = ?').run(userId, cid);
    sql(db, 'UPDATE blocks SET holders = holders - 1 WHERE cid = ?').run(cid);
    sql(db, 'UPDATE users SET data_bytes = data_bytes - ? WHERE id = ?').run(row.size ?? 0, userId);
  }
}

/** A user holding some of a set of blocks: their email, and how many of those blocks. */
export interface BlockHolder {
  readonly userId: string;
  readonly email: string;
  readonly blocks: number;
}

/** The users whose live versions hold any of `cids`, by email. One scan of user_blocks. */
export function holdersOf(db: Db, cids: readonly string[]): BlockHolder[] {
  if (cids.length === 0) return [];
  return sql<[string], BlockHolder>(
    db,
    `SELECT u.id AS userId, u.email AS email, COUNT(*) AS blocks
     FROM user_blocks ub JOIN users u ON u.id = ub.user_id
     WHERE ub.refs > 0 AND ub.cid IN (SELECT value FROM json_each(?))
     GROUP BY u.id ORDER BY u.email`,
  ).all(JSON.stringify(cids));
}
