/**
 * The disk failed a read or a write of the service's data: an I/O error (EIO) from the file
 * system, or SQLite's (SQLITE_IOERR and its extended codes: a failed fsync, read or write), as a
 * failing disk, or one pulled out while in use, gives.
 */
export function isDiskFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === 'EIO' || (typeof code === 'string' && code.startsWith('SQLITE_IOERR'));
}
