import { closeSync, fstatSync, readSync } from 'node:fs';
import { assertRegularFile, openSourceFile } from '../scanner/index.ts';

// Reading a small file whole with synchronous calls. Through the thread pool, open, read, stat
// and close cost about 50 us each in round trips, more than the read itself; synchronous, a
// cached small file takes a few microseconds and blocks the event loop no longer than that.

/** Files smaller than this are read in one synchronous read. */
export const SMALL_FILE_BYTES = 256 * 1024;

/** The file's size or mtime changed while it was read; `bytes` is what was read. */
export class ChangedWhileRead extends Error {
  readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    super('changed while read');
    this.bytes = bytes;
  }
}

/** Why a file could not be read, in words for the skipped-items report. */
export function unreadableReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'ENOENT') return 'deleted before it was read';
  // O_NOFOLLOW: the name was made a symbolic link after the walk saw a file.
  if (code === 'ELOOP') return 'it is now a symbolic link, not a regular file';
  // A damaged sector, most often: the disk may be failing, and its other files may follow.
  if (code === 'EIO') return 'the disk could not read it (an I/O error: the disk may be failing)';
  return error instanceof Error ? error.message : String(error);
}

/**
 * Reads `file` whole, expecting what the scan saw. Throws ChangedWhileRead when it grew,
 * shrank or was modified meanwhile (its ctime moved, even with its mtime set back), and the
 * file-system error when it cannot be read. `afterRead` runs between the read and the check (a
 * test seam).
 */
export async function readSmallFile(
  file: string,
  scanned: { size: number; mtimeNs: bigint; ctimeNs: bigint },
  afterRead: () => Promise<void> | undefined,
): Promise<Uint8Array> {
  // The type is checked after the read, in the fstat that is made anyway: a pipe or device
  // opened non-blocking gives back at most the buffer, or EAGAIN, without waiting.
  const fd = openSourceFile(file, false);
  try {
    // One byte more than expected, so a file that grew is noticed without a second read. Once
    // the expected bytes are in, no read is spent finding the end: a file that grew shows in
    // its size after the read, as one that changed shows in its mtime.
    const buffer = Buffer.allocUnsafe(scanned.size + 1);
    let length = 0;
    try {
      while (length < scanned.size) {
        const count = readSync(fd, buffer, length, buffer.length - length, null);
        if (count === 0) break;
        length += count;
      }
    } catch (error) {
      // EAGAIN from a pipe, EISDIR from a folder: say what the name has become instead.
      assertRegularFile(fstatSync(fd));
      throw error;
    }
    const bytes = buffer.subarray(0, length);
    await afterRead();
    const after = fstatSync(fd, { bigint: true });
    assertRegularFile(after);
    if (
      length !== scanned.size ||
      Number(after.size) !== scanned.size ||
      after.mtimeNs !== scanned.mtimeNs ||
      after.ctimeNs !== scanned.ctimeNs
    ) {
      throw new ChangedWhileRead(bytes);
    }
    return bytes;
  } finally {
    closeSync(fd);
  }
}
