/** The errno codes of a disk that stopped answering. */
const DISK_GONE_CODES: ReadonlySet<string> = new Set(['ENOTCONN', 'EIO', 'ENODEV', 'ENXIO']);

/**
 * Whether an error is a local disk that stopped answering: pulled out while in use (a FUSE
 * mount whose driver is gone, as exFAT and NTFS sticks are mounted, answers ENOTCONN; a block
 * device that is gone, ENODEV or ENXIO) or failing (EIO). Callers report it as a final
 * `disk_unavailable` naming the disk's folder.
 */
export function isDiskGone(error: unknown): error is NodeJS.ErrnoException {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && DISK_GONE_CODES.has(code);
}
