import path from 'node:path';

/**
 * The disk failed a read or a write of the service's data: an I/O error (EIO) from the file
 * system, or SQLite's (SQLITE_IOERR and its extended codes: a failed fsync, read or write), as a
 * failing disk, or one pulled out while in use, gives.
 */
export function isDiskFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === 'EIO' || (typeof code === 'string' && code.startsWith('SQLITE_IOERR'));
}

/**
 * A file of the service's data in `dataDir` (a pack, a version's list of files) is not there:
 * removed by a disk check that found it damaged, or left out of a copy of the folder.
 */
export function isLostDataFile(error: unknown, dataDir: string): boolean {
  const { code, path: file } = (error ?? {}) as { code?: unknown; path?: unknown };
  if (code !== 'ENOENT' || typeof file !== 'string') return false;
  const relative = path.relative(dataDir, path.resolve(file));
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
}
