import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { packageFile } from '../package-files/index.ts';

// The engine's SQLite state (WAL) with numbered migrations, each applied in one transaction.
// The only place the engine's SQL lives is this folder.

export type StateDb = Database.Database;

const MIGRATIONS_DIR = packageFile('main/state/migrations');
const MIGRATION_NAME = /^(\d{3})-[a-z0-9-]+\.sql$/;

/** How long a request waits for another process's write to the state database. */
export const STATE_BUSY_TIMEOUT_MS = 30_000;

/** The state database of the Canopy home `home`. */
export function stateFileOf(home: string): string {
  return path.join(home, 'state.sqlite');
}

export function openStateDatabase(file: string): StateDb {
  const db = new Database(file);
  try {
    prepareStateDatabase(db);
  } catch (error) {
    // Damaged, or busy past the wait: the caller sees why, and holds no connection to it.
    db.close();
    throw error;
  }
  return db;
}

/** Settings and migrations, each applied in one transaction. */
function prepareStateDatabase(db: StateDb): void {
  db.pragma('journal_mode = WAL');
  // A 4 MB page cache, not better-sqlite3's 16 MB: the embedded service and the engine share
  // one process, and a backup of 100 000 files filled both caches, a tenth of its peak memory.
  // The operating system's file cache still holds the hot pages.
  db.pragma('cache_size = -4000');
  db.pragma('foreign_keys = ON');
  // Another Canopy process may be writing (committing a large folder's file index takes
  // seconds): a command waits for it rather than failing. Past this, it says so (`busy`).
  // SQLite waits so only for a transaction that asks for the write lock as it begins: one that
  // read first and then meets another's write fails at once (its snapshot may be stale). So
  // every transaction here that writes begins IMMEDIATE (`db.transaction(...).immediate()`).
  db.pragma(`busy_timeout = ${STATE_BUSY_TIMEOUT_MS}`);
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
  );
  // Looked up first, outside any write: opening the database while another process writes
  // then waits for nothing, as WAL lets readers read.
  const applied = new Set(
    db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[],
  );
  for (const file of readdirSync(MIGRATIONS_DIR)
    .filter((name) => MIGRATION_NAME.test(name))
    .sort()) {
    const version = Number(MIGRATION_NAME.exec(file)?.[1]);
    if (applied.has(version)) continue;
    db.transaction(() => {
      if (db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(version)) return;
      db.exec(readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8'));
      db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(
        version,
        Date.now(),
      );
    }).immediate();
  }
}
