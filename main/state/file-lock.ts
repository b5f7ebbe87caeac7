import { truncateSync } from 'node:fs';
import Database from 'better-sqlite3';

// A lock across processes, held by an exclusive SQLite transaction on a file: the kernel drops
// it with its process, so a killed holder leaves none behind. Nothing is ever written (no
// journal file; closing rolls back), so taking it needs no free space. Within one process,
// SQLite refuses a second connection as it refuses another process.

/** SQLite's words for a file that is not a database, or a damaged one. */
const DAMAGED_FILE = new Set(['SQLITE_NOTADB', 'SQLITE_CORRUPT']);

/**
 * `file` opened as a lock, in the journal mode locks use (none on disk). A lock file holds
 * nothing, as nothing is ever written to it: one that is not an empty database was damaged on
 * its disk, and refused every command that took it ("file is not a database"). It is emptied
 * and opened again: emptied in place, not replaced, so that a lock another process holds on
 * the file stays held.
 */
export function openLockDatabase(file: string, options: Database.Options): Database.Database {
  for (let attempt = 1; ; attempt += 1) {
    const db = new Database(file, options);
    try {
      db.pragma('journal_mode = MEMORY');
      return db;
    } catch (error) {
      db.close();
      if (attempt > 1 || !DAMAGED_FILE.has(String((error as { code?: unknown }).code))) throw error;
      truncateSync(file, 0);
    }
  }
}

/** The open lock on `file`, until closed; null while someone else holds it. */
export function takeFileLock(
  file: string,
  options: { readonly mustExist?: boolean } = {},
): Database.Database | null {
  const isBusy = (error: unknown): boolean => (error as { code?: unknown }).code === 'SQLITE_BUSY';
  let db: Database.Database;
  try {
    // `mustExist`: one only looked at is not made anew when its owner removed it meanwhile.
    db = openLockDatabase(file, { timeout: 0, fileMustExist: options.mustExist === true });
  } catch (error) {
    // Its journal mode is read under a shared lock, which a holder's exclusive one refuses.
    if (isBusy(error)) return null;
    throw error;
  }
  try {
    db.exec('BEGIN EXCLUSIVE');
    return db;
  } catch (error) {
    db.close();
    if (isBusy(error)) return null;
    throw error;
  }
}
