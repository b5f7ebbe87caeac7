/** The errno codes of a disk that is gone: no file on it can be read any more. */
const DISK_GONE_CODES: ReadonlySet<string> = new Set(['ENOTCONN', 'ENODEV', 'ENXIO', 'EHOSTDOWN']);

/**
 * Whether an error is a local disk that is gone: pulled out while in use (a FUSE mount whose
 * driver is gone, as exFAT and NTFS sticks are mounted, answers ENOTCONN; a block device that
 * is gone, ENODEV or ENXIO; an SMB share whose server went away, EHOSTDOWN). No file of it can
 * be read, so a backup must not take each one for an unreadable file and store a version
 * without them: it stops, and callers report it as `disk_unavailable` naming the disk's folder.
 * An I/O error (EIO) may be one bad file, and is not this.
 */
export function isDiskGone(error: unknown): error is NodeJS.ErrnoException {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && DISK_GONE_CODES.has(code);
}
