/** The file system or SQLite ran out of space (ENOSPC, EDQUOT, SQLITE_FULL). */
export function isOutOfSpace(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL';
}
