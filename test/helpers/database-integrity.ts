import Database from 'better-sqlite3';

/** SQLite's own check of the database `file`, opened read-only: 'ok' when it is whole. */
export function integrityOf(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    return db.pragma('integrity_check', { simple: true }) as string;
  } finally {
    db.close();
  }
}
