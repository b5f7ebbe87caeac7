import { closeSync, openSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';

// Damage as a failing disk leaves it: a page of an SQLite database overwritten with bytes that
// are no b-tree page. The database is closed first, so its WAL is in the file.

/** Overwrites the first page of `table`'s b-tree (its root) in the database `file`. */
export function damageTable(file: string, table: string): void {
  const db = new Database(file, { fileMustExist: true });
  const root = db.prepare('SELECT rootpage FROM sqlite_master WHERE name = ?').pluck().get(table);
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  db.close();
  if (typeof root !== 'number') throw new Error(`no table ${table} in ${file}`);
  overwrite(file, (root - 1) * pageSize, pageSize);
}

/** Overwrites the database header of `file`: SQLite no longer knows it for a database. */
export function damageHeader(file: string): void {
  const db = new Database(file, { fileMustExist: true });
  db.close();
  overwrite(file, 0, 100);
}

function overwrite(file: string, position: number, length: number): void {
  const fd = openSync(file, 'r+');
  try {
    writeSync(fd, Buffer.alloc(length, 0xff), 0, length, position);
  } finally {
    closeSync(fd);
  }
}
