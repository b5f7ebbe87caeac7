import type { StateDb } from './database.ts';

// What each version holds, as its manifest states it (260-record-version-totals.sql): noted
// when this device stores a version or reads one's metadata, shown by `canopy versions`. Another
// device's version is known here once it was browsed, restored or built on.

export interface VersionTotals {
  /** Its regular files. */
  readonly files: number;
  /** Their bytes. */
  readonly bytes: number;
}

/** Notes what version `versionId` holds; versions never change, so a note never goes stale. */
export function rememberVersionTotals(db: StateDb, versionId: string, totals: VersionTotals): void {
  db.prepare(
    `INSERT OR REPLACE INTO version_totals (version_id, file_count, total_bytes) VALUES (?, ?, ?)`,
  ).run(versionId, totals.files, totals.bytes);
}

/** What the versions of `versionIds` hold, for those noted here. */
export function versionTotalsOf(
  db: StateDb,
  versionIds: readonly string[],
): Map<string, VersionTotals> {
  const select = db.prepare<[string], { file_count: number; total_bytes: number }>(
    'SELECT file_count, total_bytes FROM version_totals WHERE version_id = ?',
  );
  const found = new Map<string, VersionTotals>();
  for (const id of versionIds) {
    const row = select.get(id);
    if (row) found.set(id, { files: row.file_count, bytes: row.total_bytes });
  }
  return found;
}

/** Forgets what a deleted version held. */
export function forgetVersionTotals(db: StateDb, versionId: string): void {
  db.prepare('DELETE FROM version_totals WHERE version_id = ?').run(versionId);
}
