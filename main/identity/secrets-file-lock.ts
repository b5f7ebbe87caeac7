import { mkdirSync, truncateSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { EngineError } from '../api/index.ts';

// Held while the secrets file is read, changed and written back, so that two Canopy processes
// storing a key at once (two buckets created at once) do not each write back what they read
// and lose the other's. Like main/state/file-lock.ts, the lock is an exclusive SQLite
// transaction on a file of its own, which the kernel drops with its process and which writes
// nothing; this one waits for the other process instead of giving up.

/** How long a change to the secrets file waits for another process's, unless told otherwise. */
export const SECRETS_LOCK_WAIT_MS = 10_000;

/**
 * `lockFile` opened as main/state/file-lock.ts opens a lock (this module may not import it):
 * one damaged on its disk, which holds nothing, is emptied in place and opened again.
 */
function openLock(lockFile: string, waitMs: number): Database.Database {
  for (let attempt = 1; ; attempt += 1) {
    const db = new Database(lockFile, { timeout: waitMs });
    try {
      db.pragma('journal_mode = MEMORY');
      return db;
    } catch (error) {
      db.close();
      const code = (error as { code?: unknown }).code;
      if (attempt > 1 || (code !== 'SQLITE_NOTADB' && code !== 'SQLITE_CORRUPT')) throw error;
      truncateSync(lockFile, 0);
    }
  }
}

/**
 * Runs `change` with `lockFile` held by this process alone, and returns what it returns; waits
 * up to `waitMs` for another process holding it.
 */
export function whileLocked<T>(
  lockFile: string,
  change: () => T,
  waitMs = SECRETS_LOCK_WAIT_MS,
): T {
  let db: Database.Database | undefined;
  try {
    mkdirSync(path.dirname(lockFile), { recursive: true, mode: 0o700 });
    db = openLock(lockFile, waitMs);
    db.exec('BEGIN EXCLUSIVE');
  } catch (error) {
    db?.close();
    const busy = (error as { code?: unknown }).code === 'SQLITE_BUSY';
    throw new EngineError(
      'secret_store',
      busy
        ? `another Canopy process kept ${lockFile} locked for more than ${waitMs / 1000} s; try again`
        : `cannot lock ${lockFile}`,
      { retryable: busy, cause: error },
    );
  }
  try {
    return change();
  } finally {
    db.close();
  }
}
