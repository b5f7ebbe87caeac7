import { accessSync, constants, statSync } from 'node:fs';
import { EngineError } from '../api/index.ts';

/** Whether `folder` is a folder; false when it, or something above it, is a file. */
function isFolder(folder: string): boolean {
  try {
    return statSync(folder, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return false;
    throw error;
  }
}

/**
 * SQLite's words for a database it could not open or write, which name no cause: a folder that
 * went read-only under a home Canopy used before (a disk the system remounted read-only after
 * errors, most often) fails so, at the first write or at the opening of the -wal and -shm files
 * beside the database.
 */
const SQLITE_WRITE_REFUSALS = /^SQLITE_(CANTOPEN|READONLY)/;

/** Whether `error` is SQLite's refusal to open or write a database, which names no cause. */
export function isSqliteWriteRefusal(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && SQLITE_WRITE_REFUSALS.test(code);
}

/** Why `folder` cannot be written in (EROFS, EACCES, EPERM), by access(2); undefined if it can. */
function writeRefusalOf(folder: string): string | undefined {
  try {
    accessSync(folder, constants.W_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'EROFS' || code === 'EACCES' || code === 'EPERM' ? code : undefined;
  }
}

/**
 * A folder Canopy keeps something in that cannot be made or written, as its opening finds it:
 * a file where it (or a folder above it) would be, a folder the user may not write in, a
 * read-only disk. `purpose` says what the folder holds, e.g. "where Canopy keeps its state".
 * Other errors pass unchanged.
 */
export function unusableFolderError(error: unknown, folder: string, purpose: string): unknown {
  let code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (error instanceof EngineError || code === undefined) return error;
  if (SQLITE_WRITE_REFUSALS.test(code)) code = writeRefusalOf(folder) ?? code;
  if ((code === 'EEXIST' || code === 'ENOTDIR') && !isFolder(folder))
    return new EngineError(
      'usage',
      `${folder}, ${purpose}, is not a folder (a file stands there, or where a folder above it would be)`,
      { cause: error },
    );
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
    return new EngineError(
      'permission_denied',
      `cannot write in ${folder}, ${purpose}: ${code === 'EROFS' ? 'the disk is read-only (one the system made read-only after errors may be failing: to restore from your backups meanwhile, set CANOPY_HOME to a folder on another disk and log in there)' : 'permission denied'}`,
      { cause: error },
    );
  return error;
}
