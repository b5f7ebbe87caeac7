/**
 * Whether an error is a disk out of space: a file write's (ENOSPC, or EDQUOT for a quota) or
 * SQLite's (SQLITE_FULL, which better-sqlite3 puts in `code` too, or SQLITE_IOERR_SHMSIZE when
 * opening a database finds no room for its WAL index). Retrying does not free space, so
 * callers report it as a final `disk_full` naming the folder (§2 R11).
 */
export function isDiskFull(error: unknown): boolean {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return (
    code === 'ENOSPC' ||
    code === 'EDQUOT' ||
    code === 'SQLITE_FULL' ||
    code === 'SQLITE_IOERR_SHMSIZE'
  );
}
