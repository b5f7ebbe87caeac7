import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { takeFileLock } from './file-lock.ts';

// One backup per bucket at a time, across processes (two `canopy backup` commands, or a
// command beside the app). A second would resume the first's upload under it (the upload queue
// is shared through the state database), race it for the same previous version, and drop the
// file-index entries it is staging. The lock is a file lock per bucket (takeFileLock): the
// kernel drops it with its process, so a killed backup leaves none behind.

const SAFE_NAME = /^[0-9A-Za-z-]{1,64}$/;

export class BackupLock {
  private constructor(private readonly db: Database.Database) {}

  /** The lock for backups to `bucketId`, or null while another backup to it holds it. */
  static tryAcquire(home: string, bucketId: string): BackupLock | null {
    if (!SAFE_NAME.test(bucketId)) throw new Error(`not a bucket id: ${JSON.stringify(bucketId)}`);
    const dir = path.join(home, 'locks');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const db = takeFileLock(path.join(dir, `backup-${bucketId}.lock`));
    return db ? new BackupLock(db) : null;
  }

  release(): void {
    this.db.close();
  }
}
