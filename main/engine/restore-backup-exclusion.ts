import { EngineError } from '../api/index.ts';
import { pathInsideByLinks } from '../scanner/index.ts';
import {
  BackupLock,
  everyIndexedSourceDir,
  indexedSourceDirs,
  readBucket,
  RestoreMark,
  type StateDb,
} from '../state/index.ts';

// A backup of a folder while a restore writes into it would record the folder half restored:
// without what the restore had yet to write, and with the read-only folders it opened for the
// while (main/restore/opened-folders.ts) recorded writable. That version would become the
// bucket's active one, the one the next restore brings by default. So a restore into a folder a
// bucket backs up here, or into one holding or held by it, holds that bucket's backup lock while
// it runs: it is refused while a backup of it runs, and a backup that starts meanwhile is
// refused, as a second backup to one bucket is, naming the restore it waits for.

/** Whether the absolute paths `a` and `b` are one folder, or one holds the other (links too). */
function overlapping(a: string, b: string): boolean {
  try {
    return pathInsideByLinks(a, b) !== undefined || pathInsideByLinks(b, a) !== undefined;
  } catch {
    // A folder that cannot be resolved now (a network disk that stopped answering): nothing can
    // be backed up from it or restored into it meanwhile, and the one that tries says why.
    return false;
  }
}

/** The backup locks a restore holds; `release` lets go of them all. */
export interface HeldBackupLocks {
  release(): void;
}

/**
 * Takes the backup locks of the buckets that back up a folder `targetDir` overlaps, for a
 * restore into it; refused (busy) while a backup of one runs, holding none then.
 */
export function lockBackupsInto(home: string, db: StateDb, targetDir: string): HeldBackupLocks {
  const held: BackupLock[] = [];
  const release = (): void => {
    for (const lock of held.splice(0)) lock.release();
  };
  const taken = new Set<string>();
  try {
    for (const { bucketId, sourceDir } of everyIndexedSourceDir(db)) {
      if (taken.has(bucketId) || !overlapping(targetDir, sourceDir)) continue;
      const lock = BackupLock.tryAcquire(home, bucketId);
      if (!lock) {
        const name = readBucket(db, bucketId)?.name ?? bucketId;
        throw new EngineError(
          'busy',
          `a backup of ${sourceDir} to bucket "${name}" is running; wait for it to finish, then restore (a restore now would change the folder while it is read)`,
          { retryable: true },
        );
      }
      held.push(lock);
      taken.add(bucketId);
    }
  } catch (error) {
    release();
    throw error;
  }
  return { release };
}

/** The target of a restore running now into a folder `sourceDir` overlaps, if there is one. */
export function restoreRunningInto(home: string, sourceDir: string): string | undefined {
  return RestoreMark.runningTargets(home).find((target) => overlapping(target, sourceDir));
}

/** The target of a restore running now into a folder bucket `bucketId` backs up here, if one is. */
export function restoreRunningIntoBucket(
  home: string,
  db: StateDb,
  bucketId: string,
): string | undefined {
  const sources = indexedSourceDirs(db, bucketId);
  return RestoreMark.runningTargets(home).find((target) =>
    sources.some((source) => overlapping(target, source)),
  );
}

/** Why a backup of `sourceDir` waits for a restore: undefined when none into it runs. */
export function restoreBusyError(home: string, sourceDir: string): EngineError | undefined {
  const target = restoreRunningInto(home, sourceDir);
  if (target === undefined) return undefined;
  return new EngineError(
    'busy',
    `a restore into ${target} is running; wait for it to finish, then back up (a backup now would record ${sourceDir} half restored)`,
    { retryable: true },
  );
}
