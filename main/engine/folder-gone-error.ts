import { statSync } from 'node:fs';
import { EngineError, systemErrorCode } from '../api/index.ts';
import { sourceGoneError } from '../scanner/index.ts';

// A backup's source or a restore's target deleted or moved away while the work ran (a cleanup
// script, a second window) fails the work with a system error at whichever file it reached
// next: a bare ENOENT that names a file, not the folder, nor what became of the work.

/** Whether `folder` is no longer there as a folder: deleted, moved away, or a file in its place. */
function isGone(folder: string): boolean {
  try {
    return !statSync(folder).isDirectory();
  } catch (error) {
    // Any other failure to look (EIO, EACCES) is no sign that it is gone: the work's own
    // failure, which this only words, is the one to report.
    const code = systemErrorCode(error);
    return code === 'ENOENT' || code === 'ENOTDIR';
  }
}

/**
 * `error`, the failure of a backup of the folder `folder` or of a restore into it, told as that
 * folder gone (`not_found`) when it is a system error and the folder is no longer there; else
 * as it came.
 */
export function toldIfFolderGone(
  error: unknown,
  folder: string,
  what: 'backup' | 'restore',
): unknown {
  if (error instanceof EngineError || systemErrorCode(error) === undefined || !isGone(folder))
    return error;
  if (what === 'backup') return sourceGoneError(folder, error);
  return new EngineError(
    'not_found',
    `${folder} was deleted or moved away during the restore, with what was restored into it: run the restore again into a folder that stays`,
    { cause: error },
  );
}
