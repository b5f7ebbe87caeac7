import { existsSync, rmSync, writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';

// Telling that Canopy's state database is damaged, and leaving word for the next opening of it
// to rebuild it (state-repair.ts). SQLite finds a damaged page only when a query reads it, so
// the damage shows as a query's error, mostly long after the database was opened; the process
// that sees it cannot rebuild the database under its own open statements, so it marks it.

/** SQLite's codes for a file that is not, or no longer wholly, a database. */
function isDamageCode(code: unknown): boolean {
  return (
    typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB')
  );
}

/** Whether `error`, or an error it was caused by, is SQLite reading a damaged database. */
export function isDamageError(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 8; depth += 1) {
    if (isDamageCode((current as { code?: unknown }).code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Whether the database at `file` is damaged, as SQLite's quick_check finds it: asked when a
 * query failed with a damage code, as that may have come from another database of the process
 * (the embedded service's).
 */
export function isDamagedDatabase(file: string): boolean {
  if (!existsSync(file)) return false;
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { fileMustExist: true });
    const result = db.pragma('quick_check', { simple: true });
    return result !== 'ok';
  } catch (error) {
    if (isDamageError(error)) return true;
    throw error;
  } finally {
    db?.close();
  }
}

function markFileOf(file: string): string {
  return `${file}.found-damaged`;
}

/** Leaves word that `file` is damaged, for the next opening of it to rebuild it. */
export function markDamaged(file: string): void {
  writeFileSync(markFileOf(file), `${new Date().toISOString()}\n`, { mode: 0o600 });
}

export function isMarkedDamaged(file: string): boolean {
  return existsSync(markFileOf(file));
}

export function clearDamageMark(file: string): void {
  rmSync(markFileOf(file), { force: true });
}
