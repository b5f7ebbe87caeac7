/**
 * SQLite read a damaged page of the service's database, or no database at all (a failing disk,
 * a power cut on a disk that lied about its writes): SQLITE_CORRUPT and its extended codes,
 * SQLITE_NOTADB. Every request that reads that page fails alike until the operator restores
 * the file.
 */
export function isDamagedDatabase(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return (
    typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB')
  );
}
