import { accessSync, constants, existsSync, lstatSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { EngineError, formatBytes } from '../api/index.ts';

// A restore that cannot fit is told before anything is fetched: the disk filling part way
// would come after an hour's download of a large version, with most of it thrown away. The
// tree states its files' bytes, and a disk that stores bytes as they come (no compression)
// takes at least those. Only where none of the names the restore puts there is taken: a file
// or folder of such a name may hold some of the version's files already, which the restore
// leaves as they are. A restore with --sparse writes less than its bytes. Any other restore
// too large fails when the disk fills, keeping every file it finished.

/**
 * statfs(2) magic numbers of Linux file systems that never compress what they store. On Btrfs,
 * ZFS, F2FS or NTFS, and through FUSE, a file may take less room than its bytes.
 */
const UNCOMPRESSED_FILE_SYSTEMS = new Set([
  0xef53, // ext2/3/4
  0x58465342, // xfs
  0x01021994, // tmpfs
  0x4d44, // vfat
  0x2011bab0, // exfat (the kernel's driver)
]);

/** The last of what to do about a restore too large for its disk: --sparse, when it would help. */
export function roomAdvice(sparseWouldHelp: boolean): string {
  return sparseWouldHelp
    ? ', or add --sparse to leave the runs of zeros in its files (disk images, for one) as holes that take no room'
    : '';
}

/** Errors that leave the room unknown here; the restore then meets them and tells them. */
const UNKNOWN_ROOM = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOTDIR']);

/**
 * The room left on the disk of `targetDir` (there already when `targetExisted`), or undefined
 * where it cannot be told: the disk may compress, or the folder cannot be looked at (the
 * restore says why when it tries).
 */
function roomFor(targetDir: string, targetExisted: boolean): number | undefined {
  try {
    let folder = targetDir;
    // Else the folder the restore makes it in.
    if (!targetExisted)
      while (!existsSync(folder) && path.dirname(folder) !== folder) folder = path.dirname(folder);
    // A folder this process may not write in, or on a disk mounted read-only, is told as that.
    accessSync(folder, constants.W_OK);
    const disk = statfsSync(folder);
    if (!UNCOMPRESSED_FILE_SYSTEMS.has(disk.type)) return undefined;
    // Root may also write the blocks the file system keeps back from other users.
    return (process.getuid?.() === 0 ? disk.bfree : disk.bavail) * disk.bsize;
  } catch (error) {
    if (UNKNOWN_ROOM.has((error as NodeJS.ErrnoException).code ?? '')) return undefined;
    throw error;
  }
}

/** Whether something in `dir` has one of `names`; so taken too when that cannot be told. */
function anyTaken(dir: string, names: readonly string[]): boolean {
  try {
    return names.some((name) => lstatSync(path.join(dir, name), { throwIfNoEntry: false }));
  } catch (error) {
    if (UNKNOWN_ROOM.has((error as NodeJS.ErrnoException).code ?? '')) return true;
    throw error;
  }
}

/**
 * Refuses a restore of `bytes` into `targetDir` (there already when `targetExisted`) when its
 * disk has less room than that and nothing there could be left in place.
 */
export function checkRoomForRestore(input: {
  readonly targetDir: string;
  readonly targetExisted: boolean;
  /**
   * The names the restore puts at the top of `targetDir`: read from the tree only for a restore
   * too large, into a folder that was there.
   */
  readonly names: () => readonly string[];
  readonly bytes: number;
  readonly sparse: boolean;
  readonly sparseWouldHelp: boolean;
}): void {
  if (input.sparse || process.platform !== 'linux') return;
  const free = roomFor(input.targetDir, input.targetExisted);
  if (free === undefined || input.bytes <= free) return;
  const { targetDir } = input;
  if (input.targetExisted && anyTaken(targetDir, input.names())) return;
  throw new EngineError(
    'disk_full',
    `not enough free space in ${targetDir} to restore: its files hold ${formatBytes(input.bytes)}, and the disk has ${formatBytes(free)} free; nothing was restored. Free some space, restore to another disk, or restore a part of it (canopy restore PATH)${roomAdvice(input.sparseWouldHelp)}`,
  );
}
