import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { packageFile } from '../../main/package-files/index.ts';

// Opens the service's SQLite database (WAL, foreign keys, a busy timeout so the admin command
// line can write while `serve` runs) and applies numbered migrations, each in one transaction.

export type Db = Database.Database;

const MIGRATIONS_DIR = packageFile('server/store/migrations');
const MIGRATION_NAME = /^(\d{3})-[a-z0-9-]+\.sql$/;

/**
 * A full disk leaves no room for the WAL index, the `-shm` file every connection maps (SQLite
 * reports it as SQLITE_IOERR_SHMSIZE, or SQLITE_FULL).
 */
function isNoRoomForWalIndex(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return (
    typeof code === 'string' && (code.startsWith('SQLITE_IOERR_SHM') || code === 'SQLITE_FULL')
  );
}

export function openDatabase(file: string): Db {
  try {
    return openWith(file, false);
  } catch (error) {
    if (!isNoRoomForWalIndex(error)) throw error;
    // A backup disk that filled up must still be restored from. In exclusive locking mode the
    // WAL index lives in this process's memory, so no file has to grow; the price is that no
    // other process (an admin command, a second embedded service) can open the database
    // meanwhile. Writes fail on the full disk as they would anyway.
    return openWith(file, true);
  }
}

function openWith(file: string, exclusive: boolean): Db {
  const db = new Database(file);
  try {
    if (exclusive) db.pragma('locking_mode = EXCLUSIVE');
    configure(db);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

function configure(db: Db): void {
  // Pages freed by deletions can be given back to the disk a few at a time (releaseFreePages),
  // rather than only by a VACUUM that rewrites everything. It takes only on a database with
  // nothing in it yet: one made before keeps reusing its free pages, as SQLite does by default.
  // Set only there: setting it writes, even unchanged, and a full disk must still open the
  // database to restore from it.
  if (db.prepare('SELECT count(*) FROM sqlite_master').pluck().get() === 0)
    db.pragma('auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  // A 4 MB page cache, not better-sqlite3's 16 MB: the embedded service and the engine share
  // one process, and a backup of 100 000 files filled both caches, a tenth of its peak memory.
  // The operating system's file cache still holds the hot pages.
  db.pragma('cache_size = -4000');
  // FULL: a commit is durable before its answer goes. Clients trust a confirmed shard and never
  // send it again, so a power loss must not roll its record back (WAL with NORMAL may lose the
  // last commits). It costs one more sync per commit, a few per shard.
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  migrate(db);
}

/**
 * Free pages are given back once they are more than this share of the file (and more than
 * FREE_PAGES_MIN_BYTES): what a large deletion leaves. Fewer wait to be reused, as the rows a
 * backup writes and deletes again come and go; giving those back would only have the next
 * backup grow the file again.
 */
const FREE_PAGES_RELEASED_ABOVE_SHARE = 0.25;
const FREE_PAGES_MIN_BYTES = 4 << 20;
/** Pages given back in one step (one short write transaction). */
const FREE_PAGES_PER_STEP = 2048;

/**
 * Gives the database's free pages back to the disk, step by step while `inTime` holds, once
 * deletions left many: after a large bucket is deleted, its rows' pages would otherwise keep
 * the file (and its kept copy) at its largest. Returns how many pages went. Nothing happens in
 * a database made before incremental vacuum was turned on (configure).
 */
export function releaseFreePages(db: Db, inTime: () => boolean): number {
  if (db.pragma('auto_vacuum', { simple: true }) !== 2) return 0;
  const pageSize = Number(db.pragma('page_size', { simple: true }));
  const free = (): number => Number(db.pragma('freelist_count', { simple: true }));
  const pages = Number(db.pragma('page_count', { simple: true }));
  const freeAtStart = free();
  if (
    freeAtStart * pageSize <= FREE_PAGES_MIN_BYTES ||
    freeAtStart <= pages * FREE_PAGES_RELEASED_ABOVE_SHARE
  )
    return 0;
  let released = 0;
  for (let left = freeAtStart; left > 0 && inTime(); left = free()) {
    const step = Math.min(left, FREE_PAGES_PER_STEP);
    db.pragma(`incremental_vacuum(${step})`);
    released += step;
  }
  return released;
}

function migrate(db: Db): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
  );
  const applied = new Set(
    db
      .prepare<[], { version: number }>('SELECT version FROM schema_migrations')
      .all()
      .map((row) => row.version),
  );
  const files = readdirSync(MIGRATIONS_DIR)
    .filter((name) => MIGRATION_NAME.test(name))
    .sort();
  for (const file of files) {
    const version = Number(MIGRATION_NAME.exec(file)?.[1]);
    if (applied.has(version)) continue;
    const sql = readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8');
    // IMMEDIATE: two processes starting at once must not both apply the same migration.
    db.transaction(() => {
      const again = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(version);
      if (again) return;
      db.exec(sql);
      db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(
        version,
        Date.now(),
      );
    }).immediate();
  }
}
