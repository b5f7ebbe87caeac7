import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { EngineError } from '../api/index.ts';
import { openLockDatabase } from './file-lock.ts';

// Every engine on a Canopy home holds it shared for as long as it is open, so that what must
// have the home alone (rebuilding a damaged state database, which moves the file away from
// under whoever has it open) can tell whether another process has it. The lock is SQLite's own
// on a file of its own, as in file-lock.ts: a read transaction holds a shared lock, and an
// exclusive one waits for none. The kernel drops both with their process, and nothing is ever
// written to the file.

/** How long opening an engine waits for a process that has the home alone (a rebuild). */
const WAIT_MS = 30_000;

export class HomeLock {
  private constructor(private readonly db: Database.Database) {}

  /** Holds `home` shared, waiting for a process that has it alone. */
  static share(home: string): HomeLock {
    const dir = path.join(home, 'locks');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    let lock: HomeLock | undefined;
    try {
      // Its journal mode is read under a shared lock: it waits for one who has the home alone.
      lock = new HomeLock(openLockDatabase(path.join(dir, 'home.lock'), { timeout: WAIT_MS }));
      lock.holdShared();
    } catch (error) {
      lock?.db.close();
      if ((error as { code?: unknown }).code === 'SQLITE_BUSY')
        throw new EngineError(
          'busy',
          'another Canopy process has kept this Canopy home to itself for too long; try again',
          { retryable: true, cause: error },
        );
      throw error;
    }
    return lock;
  }

  private holdShared(): void {
    this.db.exec('BEGIN');
    this.db.prepare('SELECT count(*) FROM sqlite_master').get();
  }

  /**
   * Runs `work` with the home to this process alone, and returns what it returns; null, with
   * nothing run, while another process has the home open. Holds it shared again after.
   */
  alone<T>(work: () => T): T | null {
    this.db.exec('COMMIT');
    this.db.pragma('busy_timeout = 0');
    try {
      this.db.exec('BEGIN EXCLUSIVE');
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY') throw error;
      this.db.pragma(`busy_timeout = ${WAIT_MS}`);
      this.holdShared();
      return null;
    }
    try {
      return work();
    } finally {
      this.db.exec('COMMIT');
      this.db.pragma(`busy_timeout = ${WAIT_MS}`);
      this.holdShared();
    }
  }

  release(): void {
    this.db.close();
  }
}
