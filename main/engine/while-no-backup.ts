import { EngineError } from '../api/index.ts';
import type { Bucket } from '../protocol/index.ts';
import { BackupLock, type StateDb } from '../state/index.ts';
import { restoreRunningIntoBucket } from './restore-backup-exclusion.ts';

// Deleting a bucket or one of its versions while a backup to it runs (from another terminal,
// or a scheduled one) would pull from under that backup the records it builds on. A restore into
// the folder it backs up holds the same lock (restore-backup-exclusion.ts), and is named then.

/**
 * Runs `work` holding the lock a backup to `bucket` takes, so that none starts meanwhile;
 * refused (busy) while one runs. `then` says what to run once it is done.
 */
export async function whileNoBackupTo<T>(
  home: string,
  db: StateDb,
  bucket: Pick<Bucket, 'id' | 'name'>,
  then: string,
  work: () => Promise<T>,
): Promise<T> {
  const lock = BackupLock.tryAcquire(home, bucket.id);
  if (!lock) {
    const restoring = restoreRunningIntoBucket(home, db, bucket.id);
    throw new EngineError(
      'busy',
      restoring === undefined
        ? `a backup to bucket "${bucket.name}" is running; stop it or wait for it to finish, then ${then}`
        : `a restore into ${restoring} is running; stop it or wait for it to finish, then ${then}`,
      { retryable: true },
    );
  }
  try {
    return await work();
  } finally {
    lock.release();
  }
}
