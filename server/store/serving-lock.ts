import path from 'node:path';
import Database from 'better-sqlite3';

// Several processes may serve one data folder at once: the embedded service runs inside every
// `canopy` command, so a `canopy ls` in one terminal serves the folder that a backup in another
// is uploading to. Crash recovery deletes staged files and packs that no row names, which is
// safe only while no other process is writing them: it would delete an upload's pack in
// flight, or one between its rename and its commit, and lose confirmed blocks.
//
// So every serving process holds a shared lock on `serving.lock` while it runs, and recovery
// runs only under the exclusive lock, taken at start when no other process serves the folder.
// The locks are SQLite's own (file locks the kernel drops with their process), so a killed
// server leaves none behind. A process that cannot recover leaves it to the next lone start.

/** How long a starting server waits for another one's recovery to end. */
const RECOVERY_WAIT_MS = 30_000;

export class ServingLock {
  private constructor(private readonly db: Database.Database) {}

  /**
   * Takes the shared lock for serving `dataDir`. When no other process serves it, first runs
   * `recover` under the exclusive lock. Returns whether `recover` ran.
   */
  static acquire(dataDir: string, recover: () => void): { lock: ServingLock; recovered: boolean } {
    const db = new Database(path.join(dataDir, 'serving.lock'), { timeout: 0 });
    try {
      const alone = ServingLock.tryExclusive(db);
      if (alone) {
        try {
          recover();
        } finally {
          db.exec('ROLLBACK');
        }
      }
      db.pragma(`busy_timeout = ${RECOVERY_WAIT_MS}`);
      // A read transaction holds the shared lock until it ends, when the lock is released.
      db.exec('BEGIN');
      db.prepare('SELECT count(*) FROM sqlite_master').get();
      return { lock: new ServingLock(db), recovered: alone };
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /**
   * Runs `work` under the exclusive lock when no other process serves `dataDir`, and returns
   * what it returns; undefined, without running it, when another one does.
   */
  static whenAlone<T>(dataDir: string, work: () => T): T | undefined {
    const db = new Database(path.join(dataDir, 'serving.lock'), { timeout: 0 });
    try {
      if (!ServingLock.tryExclusive(db)) return undefined;
      try {
        return work();
      } finally {
        db.exec('ROLLBACK');
      }
    } finally {
      db.close();
    }
  }

  /**
   * Takes the exclusive lock on the lock file `db` unless another process holds it; false then.
   * Nothing is ever written: no journal file, and the exclusive transaction ends in a rollback.
   * So a full disk still serves, and its backups can still be restored.
   */
  private static tryExclusive(db: Database.Database): boolean {
    try {
      // Inside: while another process holds the exclusive lock (recovering), even setting the
      // journal mode is refused at once, and that process is not alone either.
      db.pragma('journal_mode = MEMORY');
      db.exec('BEGIN EXCLUSIVE');
      return true;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY') throw error;
      return false;
    }
  }

  release(): void {
    this.db.close();
  }
}
