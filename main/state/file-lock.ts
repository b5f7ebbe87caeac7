import Database from 'better-sqlite3';

// A lock across processes, held by an exclusive SQLite transaction on a file: the kernel drops
// it with its process, so a killed holder leaves none behind. Nothing is ever written (no
// journal file; closing rolls back), so taking it needs no free space. Within one process,
// SQLite refuses a second connection as it refuses another process.

/** The open lock on `file`, until closed; null while someone else holds it. */
export function takeFileLock(
  file: string,
  options: { readonly mustExist?: boolean } = {},
): Database.Database | null {
  // `mustExist`: one only looked at is not made anew when its owner removed it meanwhile.
  const db = new Database(file, { timeout: 0, fileMustExist: options.mustExist === true });
  try {
    db.pragma('journal_mode = MEMORY');
    db.exec('BEGIN EXCLUSIVE');
    return db;
  } catch (error) {
    db.close();
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY') return null;
    throw error;
  }
}
