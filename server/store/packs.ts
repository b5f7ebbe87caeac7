import type { Db } from './database.ts';
import { sql } from './statements.ts';

// Pack files (see 050-store-blocks-in-packs.sql): each row is one immutable file of blocks.
// `live_bytes` follows the blocks rows that point into the pack, so garbage collection knows
// when a pack is empty (delete it) or mostly dead (compact it). Runs in the caller's transaction.

export interface PackRow {
  readonly id: string;
  readonly bytes: number;
  readonly live_bytes: number;
}

export function insertPack(db: Db, id: string, bytes: number, liveBytes: number): void {
  sql(db, 'INSERT INTO packs (id, bytes, live_bytes) VALUES (?, ?, ?)').run(id, bytes, liveBytes);
}

/** Subtracts freed bytes; returns true when nothing in the pack is live any more. */
export function releasePackBytes(db: Db, id: string, freed: number): boolean {
  const row = sql<[number, string], { live_bytes: number }>(
    db,
    'UPDATE packs SET live_bytes = live_bytes - ? WHERE id = ? RETURNING live_bytes',
  ).get(freed, id);
  return row !== undefined && row.live_bytes <= 0;
}

export function deletePack(db: Db, id: string): void {
  sql(db, 'DELETE FROM packs WHERE id = ?').run(id);
}

export function findPack(db: Db, id: string): PackRow | undefined {
  return sql<[string], PackRow>(db, 'SELECT id, bytes, live_bytes FROM packs WHERE id = ?').get(id);
}

/** Packs whose live bytes are less than `liveShare` of the file, largest waste first. */
export function sparsePacks(db: Db, liveShare: number, max: number): PackRow[] {
  return sql<[number, number], PackRow>(
    db,
    `SELECT id, bytes, live_bytes FROM packs WHERE live_bytes < bytes * ?
     ORDER BY bytes - live_bytes DESC LIMIT ?`,
  ).all(liveShare, max);
}

export function allPackIds(db: Db): Set<string> {
  return new Set(
    sql<[], { id: string }>(db, 'SELECT id FROM packs')
      .all()
      .map((row) => row.id),
  );
}
