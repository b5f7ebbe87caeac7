import { closeSync, constants, fstatSync, openSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

// Opening a file the walk listed as a regular file, to read it. Between the walk and the read
// the name may have become something else. Opened the plain way, a named pipe blocks `open`
// until some writer comes (forever, and with it the whole backup); a device reads without end.
// Non-blocking, a pipe or device opens at once, and the type is checked before any read; for a
// regular file the flag changes nothing. A symbolic link is never followed (O_NOFOLLOW).
//
// A backup leaves the files' access times as they were (O_NOATIME), as tar --atime-preserve,
// rsync --open-noatime and borg do: a mail reader that tells new mail by an mbox read since it
// last changed, or a clean-up by `find -atime`, must not see every file as just read. The
// kernel allows it only to the file's owner (and root): any other file is opened again
// without it, and its access time is set as by any reader.

const O_READ_SOURCE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/** O_NOATIME where the system has it (Linux); 0 elsewhere. */
export const O_NOATIME_IF_ANY = constants.O_NOATIME ?? 0;

/** Whether an open with O_NOATIME failed for the flag alone: not the file's owner. */
function refusedNoAtime(error: unknown, flags: number): boolean {
  return (flags & O_NOATIME_IF_ANY) !== 0 && (error as NodeJS.ErrnoException).code === 'EPERM';
}

/** openSync with O_NOATIME, or without it for a file this process does not own. */
function openKeepingAccessTime(file: string, flags: number): number {
  const withFlag = flags | O_NOATIME_IF_ANY;
  try {
    return openSync(file, withFlag);
  } catch (error) {
    if (!refusedNoAtime(error, withFlag)) throw error;
    return openSync(file, flags);
  }
}

/** The type tests of fs.Stats and fs.BigIntStats alike. */
type FileType = Pick<
  Stats,
  'isFile' | 'isDirectory' | 'isFIFO' | 'isSocket' | 'isCharacterDevice' | 'isBlockDevice'
>;

/** What a name that should be a regular file turned out to be, in words. */
function kindOf(stats: FileType): string {
  if (stats.isDirectory()) return 'a folder';
  if (stats.isFIFO()) return 'a named pipe';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'a device';
  // No other kind can be opened here on Linux; the words must still read right.
  return 'another kind of file';
}

/** The file is no longer a regular file; `code` is stable, `message` says what it became. */
export class NotRegularFileError extends Error {
  readonly code = 'ENOTREGULAR';
  constructor(readonly kind: string) {
    super(`it is now ${kind}, not a regular file`);
    this.name = 'NotRegularFileError';
  }
}

/**
 * Opens `file` for reading without blocking. Throws the file-system error (ENOENT, EACCES,
 * ELOOP for a symbolic link) or, for anything but a regular file, NotRegularFileError.
 * `checkType: false` leaves the check to the caller, which must fstat before trusting a read.
 */
export function openSourceFile(file: string, checkType = true): number {
  const fd = openKeepingAccessTime(file, O_READ_SOURCE);
  if (!checkType) return fd;
  try {
    assertRegularFile(fstatSync(fd));
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return fd;
}

/**
 * openSourceFile through the thread pool, as a FileHandle; the type is always checked.
 * `followLinks` is for a file the user may keep elsewhere and link to (`.canopyignore`).
 */
export async function openSourceHandle(
  file: string,
  options: { followLinks?: boolean } = {},
): Promise<FileHandle> {
  const flags =
    options.followLinks === true ? O_READ_SOURCE & ~constants.O_NOFOLLOW : O_READ_SOURCE;
  const withNoAtime = flags | O_NOATIME_IF_ANY;
  const handle = await open(file, withNoAtime).catch((error: unknown) => {
    if (!refusedNoAtime(error, withNoAtime)) throw error;
    return open(file, flags);
  });
  try {
    assertRegularFile(await handle.stat());
  } catch (error) {
    await handle.close();
    throw error;
  }
  return handle;
}

/** Throws NotRegularFileError unless `stats` are a regular file's. */
export function assertRegularFile(stats: FileType): void {
  if (!stats.isFile()) throw new NotRegularFileError(kindOf(stats));
}
