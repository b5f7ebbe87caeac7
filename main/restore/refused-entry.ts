import { lstatSync, type Stats } from 'node:fs';
import path from 'node:path';
import { EntryNotRestoredError } from './entry-not-restored.ts';
import { systemErrorCode } from '../api/index.ts';

// What a restore target's file system may refuse one entry at a time, while it takes the rest:
// a FAT or exFAT disk (a USB stick) or an NTFS one refuses names holding : ? * " < > | or \ and
// cannot hold symbolic links. Such an entry is listed with the reason and the restore goes on;
// anything else (a full or read-only disk, a folder it may not write) stops it as before.
//
// A FAT32 disk also refuses a file over 4 GiB (EFBIG), which is listed the same way. Such disks
// refuse most modes too: those are only counted, since the file itself is there.
//
// The kernel's FAT and exFAT drivers refuse such a name with EINVAL; exfat-fuse with ENOENT,
// which also means "the folder is gone", so ENOENT counts only when the folder is there.

const REFUSED_NAME_CODES = new Set(['EINVAL', 'EILSEQ', 'ENAMETOOLONG']);
/** The longest path a system call takes on Linux, its terminating zero included. */
const PATH_MAX_BYTES = 4096;
/**
 * What symlink(2) gives where the file system has no symbolic links (EPERM on FAT), and chmod(2)
 * where it keeps no modes.
 */
const NOT_HELD_CODES = new Set(['ENOSYS', 'EPERM', 'EOPNOTSUPP', 'ENOTSUP']);

/**
 * Whether chmod failed because the file system keeps no such mode: FAT and exFAT, whose modes
 * come from mount options, refuse any other with EPERM. The file itself is restored.
 */
export function isModeRefused(error: unknown): boolean {
  return NOT_HELD_CODES.has(systemErrorCode(error) ?? '');
}

/** Whether something is at `file`: undefined for no such name, or for a name the disk refuses. */
export function lstatUnlessRefused(file: string): Stats | undefined {
  try {
    return lstatSync(file, { throwIfNoEntry: false });
  } catch (error) {
    if (REFUSED_NAME_CODES.has(systemErrorCode(error) ?? '')) return undefined;
    throw error;
  }
}

/**
 * The error of making the entry `name`, as a EntryNotRestoredError when the file system refused that
 * entry alone, else as it came. `kind` is the step that failed: giving a file or folder its
 * name, making a symlink, or writing a file's content.
 */
export function refusalOf(
  error: unknown,
  name: string,
  kind: 'name' | 'symlink' | 'content',
): unknown {
  const code = systemErrorCode(error) ?? '';
  if (kind === 'content')
    return code === 'EFBIG'
      ? new EntryNotRestoredError('the file is larger than the disk can hold in one file', {
          cause: error,
        })
      : error;
  if (kind === 'symlink' && NOT_HELD_CODES.has(code))
    return new EntryNotRestoredError('the disk cannot hold symbolic links', { cause: error });
  if (code === 'ENAMETOOLONG')
    return new EntryNotRestoredError(
      Buffer.byteLength(name) >= PATH_MAX_BYTES
        ? 'its path is longer than the system lets a program open (4 096 bytes on Linux); restore it into a folder nearer the top'
        : 'the name is too long for the disk',
      { cause: error },
    );
  const refused =
    REFUSED_NAME_CODES.has(code) ||
    (code === 'ENOENT' && lstatUnlessRefused(path.dirname(name))?.isDirectory() === true);
  return refused
    ? new EntryNotRestoredError('the disk does not accept this name', { cause: error })
    : error;
}
