import { accessSync, constants, lstatSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { EngineError, formatBytes } from '../api/index.ts';
import { roomOnDisk } from './disk-blocks.ts';
import { nearestFolderThere } from './nearest-folder.ts';
import { closedOnlyByItsMode } from './opened-folders.ts';
import type { TreeTotals } from './tree-totals.ts';

// A restore that cannot fit is told before anything is fetched: the disk filling part way
// would come after an hour's download of a large version, with most of it thrown away. The
// tree states its files' bytes, and a disk that stores bytes as they come (no compression)
// takes at least those, in whole blocks (disk-blocks.ts); a disk of inodes also takes one for
// every file, folder and link, and one holding many small files runs out of those first. Only
// where none of the names the restore puts there is taken: a file or folder of such a name may
// hold some of the version's files already, which the restore leaves as they are. A restore
// with --sparse writes less than its bytes, though no fewer inodes. Any other restore too large
// fails when the disk fills, keeping every file it finished.

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

/**
 * Those of them that make a file, folder or link only while they have an inode left, and say
 * truly how many they have. FAT and exFAT keep none (exfat-fuse states its free clusters).
 */
const INODE_FILE_SYSTEMS = new Set([
  0xef53, // ext2/3/4
  0x58465342, // xfs
  0x01021994, // tmpfs
]);

/** The last of what to do about a restore too large for its disk: --sparse, when it would help. */
export function roomAdvice(sparseWouldHelp: boolean): string {
  return sparseWouldHelp
    ? ', or add --sparse to leave the runs of zeros in its files (disk images, for one) as holes that take no room'
    : '';
}

/** Errors that leave the room unknown here; the restore then meets them and tells them. */
const UNKNOWN_ROOM = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOTDIR']);

/** What a disk has left, as statfs(2) tells it. */
interface DiskRoom {
  /** Bytes; undefined where the disk may compress, and take less than a file's bytes. */
  readonly free: number | undefined;
  /** The unit it stores files in: a block, or a cluster on FAT and exFAT. */
  readonly blockSize: number;
  /** Files, folders and links it can still make (inodes); undefined where it has no limit. */
  readonly entries: number | undefined;
}

/**
 * The room left on the disk of `targetDir` (there already when `targetExisted`), or undefined
 * where the folder cannot be looked at (the restore says why when it tries).
 */
function roomFor(targetDir: string, targetExisted: boolean): DiskRoom | undefined {
  try {
    // Else the folder the restore makes it in.
    const folder = targetExisted ? targetDir : nearestFolderThere(targetDir);
    // A folder this process may not write in, or on a disk mounted read-only, is told as that;
    // the user's own read-only folder is opened for the restore (opened-folders.ts).
    if (!closedOnlyByItsMode(folder)) accessSync(folder, constants.W_OK);
    const disk = statfsSync(folder);
    return {
      // Root may also write the blocks the file system keeps back from other users.
      free: UNCOMPRESSED_FILE_SYSTEMS.has(disk.type)
        ? (process.getuid?.() === 0 ? disk.bfree : disk.bavail) * disk.bsize
        : undefined,
      blockSize: disk.bsize,
      // A tmpfs mounted without a limit states none.
      entries: INODE_FILE_SYSTEMS.has(disk.type) && disk.files > 0 ? disk.ffree : undefined,
    };
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

/** A block size as file systems state it: "4 KiB", "128 KiB". */
function blockSizeText(bytes: number): string {
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

/** Why `totals` cannot fit in `room`, or undefined when they may. */
function tooLarge(
  totals: TreeTotals,
  room: DiskRoom,
  input: { readonly targetExisted: boolean; readonly sparse: boolean },
): string | undefined {
  // Every file, folder and link takes an entry, but the target folder when it is there.
  const entries = totals.files + totals.others - (input.targetExisted ? 1 : 0);
  if (room.entries !== undefined && entries > room.entries)
    return `its ${entries} files, folders and links need an entry each (an inode), and the disk can make ${room.entries} more`;
  // A sparse restore writes less than its bytes: how much less is known only as it goes.
  if (room.free === undefined || input.sparse) return undefined;
  if (totals.bytes > room.free)
    return `its files hold ${formatBytes(totals.bytes)}, and the disk has ${formatBytes(room.free)} free`;
  const taken = roomOnDisk(totals.roomAt, totals.bytes, room.blockSize);
  if (taken > room.free)
    return `its files hold ${formatBytes(totals.bytes)}, which take ${formatBytes(taken)} there, as the disk stores each file in whole blocks of ${blockSizeText(room.blockSize)}, and it has ${formatBytes(room.free)} free`;
  return undefined;
}

/**
 * Refuses a restore of `totals` into `targetDir` (there already when `targetExisted`) when its
 * disk has less room than they take and nothing there could be left in place.
 */
export function checkRoomForRestore(input: {
  readonly targetDir: string;
  readonly targetExisted: boolean;
  /**
   * The names the restore puts at the top of `targetDir`: read from the tree only for a restore
   * too large, into a folder that was there.
   */
  readonly names: () => readonly string[];
  readonly totals: TreeTotals;
  readonly sparse: boolean;
  readonly sparseWouldHelp: boolean;
  /**
   * Bytes of the files that part-written files there hold already, which the restore goes on
   * with (part-files.ts): room they take now, and keep.
   */
  readonly keptBytes?: number;
}): void {
  if (process.platform !== 'linux') return;
  const found = roomFor(input.targetDir, input.targetExisted);
  const room =
    found?.free === undefined || !input.keptBytes
      ? found
      : { ...found, free: found.free + input.keptBytes };
  const why = room && tooLarge(input.totals, room, input);
  if (why === undefined) return;
  const { targetDir } = input;
  if (input.targetExisted && anyTaken(targetDir, input.names())) return;
  throw new EngineError(
    'disk_full',
    `not enough free space in ${targetDir} to restore: ${why}; nothing was restored. Free some space, restore to another disk, or restore a part of it (canopy restore PATH)${roomAdvice(input.sparseWouldHelp)}`,
  );
}
