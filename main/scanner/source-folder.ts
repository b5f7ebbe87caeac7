import { opendirSync, statSync, type BigIntStats } from 'node:fs';
import { EngineError, systemErrorCode } from '../api/index.ts';
import { kernelFileSystemAt } from './kernel-file-systems.ts';

// The folder a backup reads must exist, be a folder and be readable. Problems below it are
// reported per item and skipped; the folder itself failing would otherwise pass for an empty
// source, or stop the backup with a raw system error.

function problemWith(dir: string, error: unknown): EngineError | undefined {
  switch (systemErrorCode(error)) {
    case 'ENOENT':
    case 'ENOTDIR':
      return new EngineError('not_found', `there is no folder ${dir} to back up`, {
        cause: error,
      });
    case 'EACCES':
    case 'EPERM':
      return new EngineError('permission_denied', `cannot read ${dir}: permission denied`, {
        cause: error,
      });
    default:
      return undefined;
  }
}

/** Throws a clear EngineError unless `dir` is a folder this process can list. */
export function checkSourceFolder(dir: string): void {
  try {
    // stat, not lstat: a source given as a symlink to a folder is that folder.
    if (!statSync(dir).isDirectory())
      throw new EngineError('usage', `${dir} is not a folder; a backup takes a folder`);
    opendirSync(dir).closeSync();
    const kernel = kernelFileSystemAt(dir);
    if (kernel !== undefined)
      throw new EngineError(
        'usage',
        `${dir} is in the kernel's ${kernel} file system, which holds no files to back up`,
      );
  } catch (error) {
    throw problemWith(dir, error) ?? error;
  }
}

function isGone(error: unknown): boolean {
  const code = systemErrorCode(error);
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/**
 * The error of a backup whose folder was deleted or moved away while it was read: a version
 * made of what was read before would hold part of a folder that is no longer there, so none
 * is made.
 */
export function sourceGoneError(dir: string, cause: unknown): EngineError {
  return new EngineError(
    'not_found',
    `${dir} was deleted or moved away during the backup: no version was made of it (the versions before are as they were)`,
    { cause },
  );
}

/** The folder `dir`'s stats, as a backup reads it again; sourceGoneError when it is gone. */
export function sourceFolderStats(dir: string): BigIntStats {
  try {
    return statSync(dir, { bigint: true });
  } catch (error) {
    throw isGone(error) ? sourceGoneError(dir, error) : error;
  }
}

/** Throws sourceGoneError unless the folder `dir` is still there (the end of a backup's read). */
export function checkSourceStillThere(dir: string): void {
  if (!sourceFolderStats(dir).isDirectory())
    throw sourceGoneError(dir, new Error(`${dir} is no longer a folder`));
}
