import { EngineError } from '../api/index.ts';
import type { Bucket } from '../protocol/index.ts';
import { BackupLock } from '../state/index.ts';

// Deleting a bucket or one of its versions while a backup to it runs (from another terminal,
// or a scheduled one) would pull from under that backup the records it builds on.

/**
 * Runs `work` holding the lock a backup to `bucket` takes, so that none starts meanwhile;
 * refused (busy) while one runs. `then` says what to run once it is done.
 */
export async function whileNoBackupTo<T>(
  home: string,
  bucket: Pick<Bucket, 'id' | 'name'>,
  then: string,
  work: () => Promise<T>,
): Promise<T> {
  const lock = BackupLock.tryAcquire(home, bucket.id);
  if (!lock)
    throw new EngineError(
      'busy',
      `a backup to bucket "${bucket.name}" is running; stop it or wait for it to finish, then ${then}`,
      { retryable: true },
    );
  try {
    return await work();
  } finally {
    lock.release();
  }
}
