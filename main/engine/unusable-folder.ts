import { statSync } from 'node:fs';
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
 * A folder Canopy keeps something in that cannot be made or written, as its opening finds it:
 * a file where it (or a folder above it) would be, a folder the user may not write in, a
 * read-only disk. `purpose` says what the folder holds, e.g. "where Canopy keeps its state".
 * Other errors pass unchanged.
 */
export function unusableFolderError(error: unknown, folder: string, purpose: string): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (error instanceof EngineError || code === undefined) return error;
  if ((code === 'EEXIST' || code === 'ENOTDIR') && !isFolder(folder))
    return new EngineError(
      'usage',
      `${folder}, ${purpose}, is not a folder (a file stands there, or where a folder above it would be)`,
      { cause: error },
    );
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
    return new EngineError(
      'permission_denied',
      `cannot write in ${folder}, ${purpose}: ${code === 'EROFS' ? 'the disk is read-only' : 'permission denied'}`,
      { cause: error },
    );
  return error;
}
