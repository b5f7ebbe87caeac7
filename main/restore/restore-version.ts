import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  fchmodSync,
  futimesSync,
  lstatSync,
  lutimesSync,
  rmSync,
  unlinkSync,
} from 'node:fs';
import { utimes } from 'node:fs/promises';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { EngineError, isDiskFull, stoppedError, systemErrorCode } from '../api/index.ts';
import { CarFormatError, cidText, RAW_CODEC } from '../protocol/index.ts';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { ServiceClient } from '../service/index.ts';
import { PhaseProgress, type RestoreProgress, type TreeIndex } from '../uploader/index.ts';
import { fileBytes, Hole, type FileDag } from './file-bytes.ts';
import { fileLeaves } from './file-leaves.ts';
import { stoppedPartWay } from './stopped-part-way.ts';
import { isZeroChunk, zeroChunkCid } from './zero-chunk.ts';
import { CHUNK_BYTES } from '../packer/unixfs-settings.ts';
import { fileTime } from './file-time.ts';
import {
  fileAsLeft,
  fileAsWritten,
  type FileAsWritten,
  type RestoredFileOnDisk,
} from './file-as-left.ts';
import { InodeNumbers } from '../scanner/index.ts';
import { AlignedSlots } from '../direct-io/index.ts';
import { openFileOutput, openPartFileOutput, type FileOutput } from './file-output.ts';
import { keptLeaves, PART_FILE_FROM_BYTES, type KeptLeaves } from './part-files.ts';
import { fsyncFully } from './file-writes.ts';
import { FileSystemFlush } from './file-system-flush.ts';
import { PendingRenames, type WrittenFile } from './pending-renames.ts';
import { placeSymlink, type FilePlacing } from './place-file.ts';
import { LeafFetcher } from './leaf-fetcher.ts';
import { unavailableBlockReason } from './receive-blocks.ts';
import type { UnavailableBlockReport } from './verify-version.ts';
import { makeFolders, modeWhileFilled } from './make-folders.ts';
import { InheritedOwners } from './inherited-owners.ts';
import { missingFoldersAbove } from './folders-above.ts';
import { mayChangeLook, OpenedFolders, type OpenedFolder } from './opened-folders.ts';
import { nearestFolderThere } from './nearest-folder.ts';
import { writeRefusalReason } from './write-refusal.ts';
import { mayReplace, OTHERS_IN_STICKY_FOLDER, REPLACING_REFUSED } from './replaceable.ts';
import { EntryNotRestoredError } from './entry-not-restored.ts';
import { isOutOfReach, temporaryPrefix } from './left-temporaries.ts';
import { entriesAlreadyThere } from './already-there.ts';
import {
  restoredFolderCopy,
  restoredName,
  type EntryKind,
  type RestoredAs,
} from './restored-copies.ts';
import { targetFolderError } from './target-folder.ts';
import { isModeRefused, lstatUnlessRefused, refusalOf } from './refused-entry.ts';
import { notInVersion } from './not-in-version.ts';
import { checkName } from './safe-name.ts';
import { versionPathParts } from './version-path.ts';
import { checkedTreeTotals } from './tree-totals.ts';
import { checkRoomForRestore, roomAdvice } from './room-for-restore.ts';
import { directoryLinks, walkTree, type DecodedNode, type TreeEntry } from './walk-tree.ts';

// Restores a version (or one path in it) into a folder: the tree comes from the metadata CAR,
// leaves from the storage host, each verified against its CID; files are written (several at
// a time) to a temporary name, given their mode and mtime, fsynced, and renamed. Existing files
// are kept unless `overwrite`: a restored copy then gets a " (restored)" suffix. Folders that
// were there keep their mode and mtime unless `overwrite`, and the target folder always does;
// the user's own read-only ones are opened while the restore writes into them (opened-folders.ts).
//
// A file's mode and mtime go on through its descriptor before the fsync, so one journal commit
// holds them with its data; its rename waits, with those of other written files, and a batch is
// renamed at once. On ext4, a chmod, a utimes or a rename after each file's fsync made writing
// 10 000 small files one by one take about twice as long; in the restore itself, doing neither
// made small files about 13 % faster. A file is only ever renamed once it is whole and on disk,
// so its real name never shows a part of it, even after a power cut.
//
// Where the target's file system can be flushed whole (file-system-flush.ts: ext4, xfs, btrfs on
// Linux), files are not fsynced one by one: a batch of written files waits for one flush of the
// file system, started after the last of them was written (or 2 s after the first was, over
// a slow link), and is renamed once it is done. Cold restores of the bench set took
// 5.4-6.6 s this way against 6.2-7.1 s with each file fsynced (four alternating pairs, each
// faster). If a flush fails, that batch's files are fsynced one by one, as everywhere else, and
// so is every file after it. The written files wait for their batches in pending-renames.ts.
//
// Temporary names are `.canopy-restore-<token>-<n>`: one token per restore, a counter per file.
// A restore killed part-way leaves its temporaries; the engine marks each restore under way,
// and the next one removes what a stopped one left (left-temporaries.ts). A random name per file
// cost about 25 µs of this thread each (0.3 s for 11 000 files), and without the file's own
// name in it, a temporary name is never too long for the file system.
//
// An entry the target's file system will not take (a name a FAT or exFAT disk refuses, a symlink
// where there are none), or a file whose bytes the server cannot give back whole (a block lost
// or damaged on its disk), is listed in `notRestored` and the restore goes on; a folder's
// contents then go with it. Such a disk may also take two names that differ only in case for
// one: a name is settled only once a file of the same name, whatever its case, is written and
// renamed.
//
// A block that comes back damaged is fetched once more before its file is given up: a small one
// as it arrives (receive-blocks.ts), a large one, checked only as it is written (file-output.ts),
// by writing its file again, with all its leaves fetched anew, once every other file is written.
// Bytes damaged on the way (a flaky link, memory) then cost one file's fetch, not the file.

// A large file a restore stopped part-way left is gone on with by the next restore into the same
// place: from the leaves it holds whole, read back and checked (part-files.ts). Those come to its
// writer as KeptLeaf holes, moved past without being written, and are neither fetched nor
// counted in the restore's progress, whose rate they would skew.

const FILES_IN_FLIGHT = 8;
/** A mode's set-user-ID and set-group-ID bits (S_ISUID, S_ISGID). */
const SET_ID_BITS = 0o6000;
export interface RestoreInput {
  readonly client: ServiceClient;
  readonly storageHost: string;
  /** The version's tree, from its metadata CAR. */
  readonly tree: TreeIndex;
  readonly targetDir: string;
  /** Only this path of the version, as a user gives it (version-path.ts); undefined: all. */
  readonly subPath?: string;
  /**
   * `targetDir` is where the folder of `subPath` was backed up from (a restore to the original
   * place): the folders above it that are missing there are made as the version holds them,
   * with their modes and times (folders-above.ts).
   */
  readonly foldersAboveAsBackedUp?: boolean;
  readonly overwrite: boolean;
  /**
   * In the names files are written under until whole (see temporaryPrefix); random when not
   * given. The engine gives its restore mark's, so a later run can remove what a kill left.
   */
  readonly temporaryToken?: string;
  /**
   * Takes each read-only folder of the user's own before the restore opens it to write into
   * (opened-folders.ts), to be kept where a crash leaves it.
   */
  readonly onFolderOpening?: (folder: OpenedFolder) => void;
  /** Test seam for crash-point tests: a file is written whole, before its rename. */
  readonly afterFileWritten?: (writtenSoFar: number) => void;
  /** Takes the restore's progress, at most every 200 ms and once at its end. */
  readonly onProgress?: (progress: RestoreProgress) => void;
  /**
   * Takes each file once it is whole under its name, as the restore left it. Not called for a
   * file whose leaves a leaf list cannot hold.
   */
  readonly onFileRestored?: (file: RestoredFileOnDisk) => void;
  /**
   * Leaves each whole chunk of zeros in a file a hole, taking no room on the disk, as `cp
   * --sparse=always` does: a disk image restores at the size its data takes. Its bytes read the
   * same; only what the disk allocates differs.
   */
  readonly sparse?: boolean;
  /**
   * Gives files their mode without the set-user-ID and set-group-ID bits. A version keeps no
   * owners, so a restore makes every file its own: run as root, it would make a program the user
   * had marked to run as themselves (or that a hostile server marked) run as root. The engine
   * asks it of a restore run as root.
   */
  readonly dropSetIdBits?: boolean;
  /**
   * Gives each file, folder and link the restore makes the owner and group of the folder it is
   * made in (inherited-owners.ts), as this process's own would otherwise be: the engine asks it
   * of a restore run as root, whose files would all be root's.
   */
  readonly ownersFromFolders?: boolean;
  /**
   * Stops the restore with `stopped`: no new file is begun, the files waiting for blocks fail
   * (their temporaries removed), and those already whole get their names. The client given is
   * stopped by the same signal, which cuts off its requests.
   */
  readonly signal?: AbortSignal;
  /**
   * Files that restores into this place stopped part-way left (part-files.ts): their temporary
   * names, by the place each is bound for (where it goes when nothing has that name). A file
   * restored to that place is gone on with from the leaves it holds whole. The caller removes
   * those not taken.
   */
  readonly partFiles?: ReadonlyMap<string, string>;
  /**
   * Takes each file of PART_FILE_FROM_BYTES or more before its temporary is made, and each part
   * file gone on with before it is written to, with its place: one of those a restore that
   * stops leaves under its temporary name, for the next to go on with. The engine notes them
   * in its restore mark.
   */
  readonly onPartFile?: (part: { readonly temporary: string; readonly place: string }) => void;
}

/** A part-written file a restore goes on with: its temporary name, and what it holds whole. */
interface ContinuedFile extends KeptLeaves {
  readonly temporary: string;
}

/** A leaf a part-written file holds whole already: moved past, neither fetched nor written. */
class KeptLeaf extends Hole {}

/** A part-written file that could not be opened to go on with: it is written again whole. */
class PartFileUnusable extends Error {}

/** What kept its name though the restore was to replace it, by its path below the target. */
export interface NotReplaced {
  readonly path: string;
  readonly reason: string;
}

/** An entry the target's file system would not take, by its path below the target. */
export interface NotRestored {
  readonly path: string;
  readonly reason: string;
}

export interface RestoreResult {
  readonly files: number;
  /** Folders made, or given the version's mode and mtime (--overwrite); not those left as they were. */
  readonly directories: number;
  readonly symlinks: number;
  readonly bytes: number;
  readonly renamed: readonly string[];
  /** Each of `renamed` with the path of the entry it is, which something else kept in the target. */
  readonly restoredBeside: readonly RestoredAs[];
  /**
   * With `overwrite`, what had the name of an entry restored beside it (in `renamed`) because
   * it may not be replaced, by path, with why (replaceable.ts).
   */
  readonly notReplaced: readonly NotReplaced[];
  /**
   * Files and links the target held already, byte for byte (already-there.ts): left as they
   * were, and not fetched. Only without `overwrite`.
   */
  readonly alreadyThere: number;
  /**
   * Files and links the target held already, byte for byte, in a copy a restore before put
   * beside what kept their name (" (restored)"): left as they were, and not fetched or copied
   * again. Only without `overwrite`.
   */
  readonly restoredBefore: readonly RestoredAs[];
  /** By path; empty when everything was restored. */
  readonly notRestored: readonly NotRestored[];
  /**
   * Blocks, by CID text, that came back damaged and then whole when fetched again: their files
   * are restored, yet something on the way (the link, memory, the server's disk) damages data.
   */
  readonly wholeOnRetry: readonly string[];
  /** Blocks the host could not give back whole; the files needing them are in `notRestored`. */
  readonly unavailable: readonly UnavailableBlockReport[];
  /**
   * Files and folders restored with the target disk's own permissions, since it would not take
   * theirs (FAT and exFAT).
   */
  readonly modesNotKept: number;
  /**
   * Folders that were there, of another user's (a team's shared folder), given the version's
   * mode and mtime with `overwrite`: only their owner may change those, and they keep their own.
   */
  readonly foldersOfOthers: number;
  /**
   * Files restored without the set-user-ID or set-group-ID bit their mode had (`dropSetIdBits`),
   * by their path below the target.
   */
  readonly setIdBitsDropped: readonly string[];
  /**
   * Files, folders and links made and given the owner of the folder they went into, another
   * than this process's (`ownersFromFolders`).
   */
  readonly ownersFromFolders: number;
  /** Part-written files a stopped restore left, gone on with (RestoreInput.partFiles). */
  readonly continuedFiles: number;
  /** The bytes those held whole, kept and not fetched again. */
  readonly keptBytes: number;
}

/** The bytes the part files named by `temporaries` hold; one not there holds none. */
function bytesOfPartFiles(temporaries: Iterable<string>): number {
  let bytes = 0;
  for (const temporary of temporaries) {
    try {
      bytes += lstatSync(temporary, { throwIfNoEntry: false })?.size ?? 0;
    } catch (error) {
      // One out of reach now is not gone on with either (continuedFiles).
      if (!isOutOfReach(error)) throw error;
    }
  }
  return bytes;
}

/** A file whose leaf did not match its CID as it was written, to be written again. */
interface FileToWriteAgain {
  readonly entry: TreeEntry;
  /** Where it goes unless something is in the way, and where its first try was to go. */
  readonly destination: string;
  readonly target: string;
  /** Its path below the target. */
  readonly relative: string;
  /**
   * The leaf that did not match, by its CID's text; undefined for a part-written file that
   * could not be gone on with.
   */
  readonly damagedCid: string | undefined;
}

/**
 * A full disk, or a target this process may not write, is a clear, final error; anything else
 * is reported as it came. `sparseWouldHelp`: the version's files hold whole chunks of zeros,
 * which a sparse restore would leave as holes taking no room.
 */
function restoreError(error: unknown, targetDir: string, sparseWouldHelp = false): Error {
  if (isDiskFull(error)) {
    return new EngineError(
      'disk_full',
      `not enough free space in ${targetDir} to restore; free some space and run it again${roomAdvice(sparseWouldHelp)}`,
      { cause: error },
    );
  }
  const { code, path: failed } = error as NodeJS.ErrnoException;
  const reason = writeRefusalReason(code);
  if (reason !== undefined) {
    // The failed path is what was being made there: a folder, or a file's temporary name.
    const where = failed === undefined ? targetDir : path.dirname(failed);
    return new EngineError('permission_denied', `cannot write in ${where}: ${reason}`, {
      cause: error,
    });
  }
  return error instanceof Error ? error : new Error(String(error));
}

function countOf(items: Iterable<unknown>): number {
  let count = 0;
  const iterator = items[Symbol.iterator]();
  while (iterator.next().done !== true) count += 1;
  return count;
}

/**
 * `dag` with a leaf the server could not give back read as zeros of its size, and reported to
 * `onGap`: the file's later leaves are still taken, since the files after it wait for them.
 */
function withGaps(
  dag: FileDag,
  sizeOf: (cid: CID) => number,
  onGap: (error: EntryNotRestoredError) => void,
): FileDag {
  return {
    node: (cid) => dag.node(cid),
    leaf: async (cid) => {
      try {
        return await dag.leaf(cid);
      } catch (error) {
        if (!(error instanceof EntryNotRestoredError)) throw error;
        onGap(error);
        return [new Uint8Array(sizeOf(cid))];
      }
    },
  };
}

/** The CID of the leaf that did not match it as it was written, if that is why `error` came. */
function leafDamagedAsWritten(error: unknown): string | undefined {
  return error instanceof EntryNotRestoredError && error.cause instanceof CarFormatError
    ? error.cause.mismatchedCid
    : undefined;
}

/**
 * Why writing a file's bytes failed, as an EntryNotRestoredError when that file alone is left
 * out (a leaf that did not match its CID, a file too large for the disk), else as it came.
 */
function contentError(error: unknown, target: string): unknown {
  if (error instanceof CarFormatError && error.mismatchedCid !== undefined)
    return new EntryNotRestoredError(unavailableBlockReason(error.mismatchedCid, 'damaged'), {
      cause: error,
    });
  return refusalOf(error, target, 'content');
}

/** Takes a file's leaves and drops them: a file inside a folder the target refused. */
async function discardFile(cid: CID, dag: FileDag, sizeOf: (cid: CID) => number): Promise<void> {
  const bytes = fileBytes(
    cid,
    withGaps(dag, sizeOf, () => undefined),
  );
  for (let next = await bytes.next(); next.done !== true; next = await bytes.next());
}

/** Whether anything (a file, folder or link) has this name; other errors are real errors. */
function exists(file: string): boolean {
  return lstatUnlessRefused(file) !== undefined;
}

/**
 * What keeps `file`'s name: 'kept' for anything unless `overwrite`, and always a folder;
 * 'theirs' for another user's that this one may not replace (replaceable.ts); undefined when
 * nothing has it, or what has it is replaced.
 */
function keeperOf(file: string, overwrite: boolean): 'kept' | 'theirs' | undefined {
  const existing = lstatUnlessRefused(file);
  if (existing === undefined) return undefined;
  if (!overwrite || existing.isDirectory()) return 'kept';
  return mayReplace(file, existing) ? undefined : 'theirs';
}

/**
 * A path as a file system that ignores case and Unicode normalization (exFAT, NTFS, APFS) may
 * see it. Used only to wait for a write of a name that may be the same: never to rename.
 */
function foldedName(file: string): string {
  return file.normalize('NFC').toLowerCase();
}

/** A free name beside `file`; `claimed` tells names this restore is writing but has not yet. */
function freeName(file: string, kind: EntryKind, claimed: (folded: string) => boolean): string {
  for (let index = 1; ; index += 1) {
    const candidate = restoredName(file, index, kind);
    if (!claimed(foldedName(candidate)) && !exists(candidate)) return candidate;
  }
}

/** The files a restore writes and their bytes: its progress's totals. */
interface RestoreTotals {
  readonly files: number;
  readonly bytes: number;
}

/** Counts the files of `entries` and their bytes, but those `isThere` says the target holds. */
function totalsOfEntries(
  entries: Iterable<TreeEntry>,
  isThere: (entry: TreeEntry) => boolean,
  fileSizeOf: (entry: TreeEntry) => number,
): RestoreTotals {
  let files = 0;
  let bytes = 0;
  for (const entry of entries) {
    if (entry.kind !== 'file' || isThere(entry)) continue;
    files += 1;
    bytes += fileSizeOf(entry);
  }
  return { files, bytes };
}

/** What a restore did so far, counted as it goes. */
function emptyTally() {
  return {
    files: 0,
    directories: 0,
    symlinks: 0,
    bytes: 0,
    restoredBeside: [] as RestoredAs[],
    notReplaced: [] as NotReplaced[],
    alreadyThere: 0,
    restoredBefore: [] as RestoredAs[],
    notRestored: [] as NotRestored[],
    wholeOnRetry: [] as string[],
    unavailable: [] as UnavailableBlockReport[],
    modesNotKept: 0,
    foldersOfOthers: 0,
    setIdBitsDropped: [] as string[],
    ownersFromFolders: 0,
    continuedFiles: 0,
    keptBytes: 0,
  };
}

type RestoreTally = ReturnType<typeof emptyTally>;

export async function restoreVersion(input: RestoreInput): Promise<RestoreResult> {
  const opened = new OpenedFolders(input.onFolderOpening);
  const tally = emptyTally();
  let result: RestoreResult;
  try {
    result = await restoreInto(input, opened, tally);
  } catch (error) {
    // That failure is what is told: a folder that cannot have its mode back then (its disk
    // gone, say) is part of it.
    opened.close();
    throw stoppedPartWay(error, tally, input.targetDir);
  }
  const [notGivenBack] = opened.close();
  if (notGivenBack !== undefined) throw restoreError(notGivenBack, input.targetDir);
  return result;
}

/**
 * restoreVersion, with the user's read-only folders it writes into opened in `opened`, counting
 * what it does in `result`.
 */
async function restoreInto(
  input: RestoreInput,
  opened: OpenedFolders,
  result: RestoreTally,
): Promise<RestoreResult> {
  const index = input.tree;
  const root = CID.asCID(index.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  /** The leaves of a file in read order, as fileBytes reads them; none for other entries. */
  const leafCidsOf = (cid: CID, decodedRoot?: DecodedNode): Generator<CID> =>
    fileLeaves(cid, index.nodes, decodedRoot);
  /** Whether a leaf is left a hole, neither fetched nor written: a chunk of zeros, if asked. */
  const isHole = (cid: CID): boolean => input.sparse === true && isZeroChunk(cid);
  const sparseWouldHelp = input.sparse !== true && index.leaves.has(zeroChunkCid());
  /**
   * The leaves of a file the storage host is asked for, as it names them: all but holes, and
   * but the first `kept`, which a part-written file holds whole.
   */
  function* fetchedLeavesOf(cid: CID, decodedRoot?: DecodedNode, kept = 0): Generator<string> {
    let at = 0;
    for (const leaf of leafCidsOf(cid, decodedRoot))
      if (at++ >= kept && !isHole(leaf)) yield cidText(leaf);
  }
  /** A leaf's size as the tree states it, for a gap where the server could not give it. */
  const leafSize = (cid: CID): number => index.leaves.sizeOf(cid) ?? 0;
  /** A file's size as its root states it; 0 for a damaged root (fileBytes reports that). */
  const fileSizeOf = (cid: CID, decodedRoot?: DecodedNode): number => {
    if (cid.code === RAW_CODEC) return leafSize(cid);
    if (decodedRoot) return Number(decodedRoot.unixfs.fileSize());
    const node = index.nodes.get(cid);
    try {
      const data = node && dagPb.decode(node).Data;
      return data ? Number(UnixFS.unmarshal(data).fileSize()) : 0;
    } catch {
      return 0;
    }
  };
  /** One aligned slot for each file written at once, for O_DIRECT (file-output.ts). */
  const slots = AlignedSlots.tryCreate(FILES_IN_FLIGHT);
  const wanted = versionPathParts(input.subPath, index.manifest['source_label']);
  // Before the tree is walked: a hostile one could stand for more paths than any disk holds.
  const wantedTotals = checkedTreeTotals(index.manifest, root, index.nodes, wanted, 'restored');
  /** Notes that the entry whose place is `kept` went to `free` instead, beside what has it. */
  const noteRenamed = (kept: string, free: string): void => {
    result.restoredBeside.push({
      path: path.relative(input.targetDir, kept),
      as: path.relative(input.targetDir, free),
    });
  };
  const owners =
    input.ownersFromFolders === true && process.getuid && process.getgid
      ? new InheritedOwners({ uid: process.getuid(), gid: process.getgid() })
      : undefined;
  /** Gives a folder the restore made the owner of the folder it is in (ownersFromFolders). */
  const folderMade = owners ? (dir: string) => owners.giveItem(dir) : undefined;
  /** Gives `file` (a path, or an open descriptor) the mode it had, where the disk can hold it. */
  const keepMode = (file: string | number, mode: number): void => {
    try {
      if (typeof file === 'number') fchmodSync(file, mode);
      else chmodSync(file, mode);
    } catch (error) {
      if (!isModeRefused(error)) throw error;
      result.modesNotKept += 1;
    }
  };
  const directoryTimes: Array<{
    dir: string;
    mode: number | undefined;
    mtime: bigint | undefined;
  }> = [];
  // The target may be any folder the user named, their home or /tmp even: if it was there,
  // the version's root folder does not change its mode.
  let targetExisted: boolean;
  try {
    targetExisted = exists(input.targetDir);
    if (wantedTotals)
      checkRoomForRestore({
        targetDir: input.targetDir,
        targetExisted,
        // The version's top entries, or the one wanted, land in the target under their names.
        names: () =>
          wanted.length === 0
            ? (directoryLinks(root, index.nodes) ?? []).map((link) => link.name)
            : wanted.slice(-1),
        totals: wantedTotals,
        sparse: input.sparse === true,
        sparseWouldHelp,
        keptBytes: bytesOfPartFiles(input.partFiles?.values() ?? []),
      });
    const foldersAbove = input.foldersAboveAsBackedUp
      ? missingFoldersAbove(root, index.nodes, wanted, input.targetDir)
      : [];
    // What is made goes into the nearest folder there.
    if (!targetExisted) opened.openIfClosed(nearestFolderThere(input.targetDir));
    for (const above of foldersAbove)
      await makeFolders(above.dir, modeWhileFilled(above.mode), folderMade);
    await makeFolders(input.targetDir, undefined, folderMade);
    // Given their modes and times last, as the folders restored are.
    directoryTimes.push(...foldersAbove);
  } catch (error) {
    // The room check's refusal, told as it is.
    if (error instanceof EngineError) throw error;
    throw targetFolderError(error, input.targetDir) ?? restoreError(error, input.targetDir);
  }
  /** Flushes the target's file system for batches of files; undefined: each file is fsynced. */
  let flush: FileSystemFlush | undefined;
  try {
    flush = FileSystemFlush.forFolder(input.targetDir);
  } catch (error) {
    throw restoreError(error, input.targetDir);
  }
  /** Where restored files and symlinks go when their names were taken meanwhile (place-file.ts). */
  const placing: FilePlacing = {
    replace: input.overwrite,
    nameBeside: (target) => freeName(target, 'file or link', (folded) => nameTaken(folded)),
    notReplaced: (target, reason) =>
      result.notReplaced.push({ path: path.relative(input.targetDir, target), reason }),
  };
  const renames = new PendingRenames(
    flush,
    FILES_IN_FLIGHT,
    {
      renamed: (file, placedAt) => {
        result.bytes += file.bytes;
        result.files += 1;
        // Its name taken while it was written: beside it, as one taken from the start is.
        if (placedAt !== file.target) noteRenamed(file.target, placedAt);
        // As it is once renamed, which moves its ctime.
        const asLeft = file.asWritten && fileAsLeft(placedAt, file.asWritten, inodes);
        if (asLeft) input.onFileRestored?.(asLeft);
        if (file.setIdBitsDropped)
          result.setIdBitsDropped.push(path.relative(input.targetDir, placedAt));
      },
      refused: (relative, reason) => result.notRestored.push({ path: relative, reason }),
      failed: (error) => stop(error),
    },
    placing,
  );
  /** Inode numbers as a backup's walk finds them, for the files told to `onFileRestored`. */
  const inodes = new InodeNumbers();
  const namePrefix = temporaryPrefix(input.temporaryToken ?? randomBytes(4).toString('hex'));
  let temporaryCount = 0;
  let filesWritten = 0;
  let matched = false;

  /**
   * Opens where a file's bytes go: the part-written file it goes on with, or a new temporary in
   * `folder`; and whether it is noted as a part file (RestoreInput.onPartFile), kept if the
   * restore stops. A part file that cannot be opened throws PartFileUnusable once the leaves
   * planned for it are taken: the file is then written again whole.
   */
  async function openOutput(
    entry: TreeEntry,
    folder: string,
    place: string,
    dag: FileDag,
    partial: ContinuedFile | undefined,
  ): Promise<{ temporary: string; output: FileOutput; noted: boolean }> {
    const size = fileSizeOf(entry.cid, entry.fileNode);
    if (partial) {
      const { temporary } = partial;
      try {
        input.onPartFile?.({ temporary, place });
        const output = openPartFileOutput(temporary, size, partial.bytes);
        return { temporary, output, noted: input.onPartFile !== undefined };
      } catch (error) {
        // Its leaves after those kept are planned: taken, as the files after it wait for them.
        await discardFile(entry.cid, dag, leafSize);
        throw new PartFileUnusable(`${temporary} could not be gone on with`, { cause: error });
      }
    }
    temporaryCount += 1;
    const temporary = path.join(folder, `${namePrefix}${temporaryCount}`);
    const noted = size >= PART_FILE_FROM_BYTES && input.onPartFile !== undefined;
    if (noted) input.onPartFile?.({ temporary, place });
    return { temporary, output: openFileOutput(temporary, 0o600, size, slots), noted };
  }

  /**
   * Writes a symlink in place, or a file to a temporary name beside `target` (or into the
   * part-written file it goes on with): whole, with its mode and mtime, and fsynced. The file
   * is then returned for renameWritten to rename. `place` is where it goes when nothing has
   * that name, as its restore mark notes a large one.
   */
  async function restoreFile(
    entry: TreeEntry,
    target: string,
    dag: FileDag,
    place: string,
    partial?: ContinuedFile,
  ): Promise<WrittenFile | undefined> {
    const { mtimeNanoseconds } = entry;
    if (entry.kind === 'symlink') {
      let linkAt: string;
      try {
        linkAt = placeSymlink(entry.target ?? '', target, placing);
      } catch (error) {
        throw refusalOf(error, target, 'symlink');
      }
      // Its name taken since it was looked at: beside it, as a file is.
      if (linkAt !== target) noteRenamed(target, linkAt);
      owners?.giveItem(linkAt);
      if (mtimeNanoseconds !== undefined) {
        const time = fileTime(mtimeNanoseconds);
        lutimesSync(linkAt, time, time);
      }
      result.symlinks += 1;
      return undefined;
    }
    const folder = path.dirname(target);
    const flushed = renames.flushCovers(folder);
    const { temporary, output, noted } = await openOutput(entry, folder, place, dag, partial);
    /** The file's bytes written, or kept from its part-written file. */
    let written = 0;
    /** Those of them counted in the restore's progress: all but those kept. */
    let counted = 0;
    let asWritten: FileAsWritten | undefined;
    const setIdBitsDropped =
      input.dropSetIdBits === true && entry.mode !== undefined && (entry.mode & SET_ID_BITS) !== 0;
    try {
      // A file larger than the disk holds in one (4 GiB on FAT32) fails with EFBIG part way, and
      // one whose block the server cannot give back, or gives back damaged, has a gap. Either
      // way the rest of its leaves are still taken, unwritten: the files after it wait for them.
      let leftOut: EntryNotRestoredError | undefined;
      let gap: EntryNotRestoredError | undefined;
      const gapped = withGaps(dag, leafSize, (error) => {
        gap ??= error;
      });
      for await (const part of fileBytes(entry.cid, gapped, entry.fileNode)) {
        if (leftOut || gap) continue;
        try {
          const count = await output.write(part);
          written += count;
          if (!(part instanceof KeptLeaf)) {
            counted += count;
            progress?.addBytes(count);
          }
        } catch (error) {
          const refusal = contentError(error, target);
          if (!(refusal instanceof EntryNotRestoredError)) throw error;
          leftOut = refusal;
        }
      }
      if (gap) throw gap;
      if (leftOut) throw leftOut;
      try {
        await output.finish();
      } catch (error) {
        const refusal = refusalOf(error, target, 'content');
        throw refusal instanceof EntryNotRestoredError ? refusal : error;
      }
      // Before its mode: a change of owner takes the set-ID bits off.
      owners?.giveFile(output.fd, folder, input.overwrite ? target : undefined);
      if (entry.mode !== undefined)
        keepMode(output.fd, setIdBitsDropped ? entry.mode & ~SET_ID_BITS : entry.mode);
      if (mtimeNanoseconds !== undefined) {
        const time = fileTime(mtimeNanoseconds);
        futimesSync(output.fd, time, time);
      }
      if (!flushed) await fsyncFully(output.fd);
      asWritten = input.onFileRestored
        ? fileAsWritten(output.fd, folder, leafCidsOf(entry.cid, entry.fileNode), inodes)
        : undefined;
    } catch (error) {
      output.close();
      // A large file stopped with its restore, rather than left out on its own, stays as it is
      // for the next restore to go on with: its restore mark names it. Not when the disk is
      // full: the user frees room first, and a hidden file must not keep it. Nor when it got
      // no byte: an empty part file saves the next restore nothing, and would be told as kept.
      const outOfRoom =
        isDiskFull(error) || (failure instanceof EngineError && failure.code === 'disk_full');
      const nothingWritten = written === 0 && partial === undefined;
      if (!noted || outOfRoom || nothingWritten || error instanceof EntryNotRestoredError)
        rmSync(temporary, { force: true });
      progress?.addBytes(-counted);
      throw error;
    }
    output.close();
    progress?.addFile();
    if (partial) {
      result.continuedFiles += 1;
      result.keptBytes += partial.bytes;
    }
    return {
      temporary,
      target,
      bytes: written,
      synced: !flushed,
      ...(asWritten ? { asWritten } : {}),
      ...(setIdBitsDropped ? { setIdBitsDropped } : {}),
    };
  }

  /**
   * The entries to restore, in order: everything, or the wanted path and what it holds. Both
   * walks below take their entries from here, so their leaf reads line up one for one.
   */
  const restored = (): Generator<TreeEntry> => walkTree(root, index.nodes, wanted);
  /** An entry's path below the target: the wanted path lands in it under its own name. */
  const relativeOf = (entry: TreeEntry): string =>
    entry.parts.slice(Math.max(0, wanted.length - 1)).join('/');
  // A target that was not there holds nothing yet; with `overwrite`, what it holds is replaced.
  const alreadyThere =
    targetExisted && !input.overwrite
      ? await entriesAlreadyThere(
          (function* withRelative() {
            for (const entry of restored()) {
              // Before any name is looked up in the target: a hostile one would lead out of it.
              for (const part of entry.parts) checkName(part);
              yield { entry, relative: relativeOf(entry) };
            }
          })(),
          input.targetDir,
          (entry) => ({
            size: fileSizeOf(entry.cid, entry.fileNode),
            leaves: () => leafCidsOf(entry.cid, entry.fileNode),
            leafSize: (leaf) => index.leaves.sizeOf(leaf),
          }),
        ).catch((error: unknown) => {
          throw restoreError(error, input.targetDir);
        })
      : new Map<string, string | undefined>();
  /** Whether the target holds this file or link already, as the version has it. */
  const isThere = (entry: TreeEntry): boolean =>
    alreadyThere.size > 0 && entry.kind !== 'directory' && alreadyThere.has(relativeOf(entry));
  /**
   * The part-written files of `partFiles` the restore goes on with, by their files' paths below
   * the target: each bound for the place of a file it writes, and holding its first leaves,
   * read back as the 'checking' phase. One bound for the place of a file the target holds
   * already, or holding none of its file's leaves, is removed: nothing will go on with it.
   */
  const continuedFiles = async (
    partFiles: ReadonlyMap<string, string> | undefined,
  ): Promise<Map<string, ContinuedFile>> => {
    const found = new Map<string, ContinuedFile>();
    if (partFiles === undefined || partFiles.size === 0) return found;
    const bound: Array<{ entry: TreeEntry; relative: string; temporary: string }> = [];
    for (const entry of restored()) {
      if (entry.kind !== 'file') continue;
      for (const part of entry.parts) checkName(part);
      const relative = relativeOf(entry);
      const temporary = partFiles.get(path.join(input.targetDir, relative));
      if (temporary !== undefined) bound.push({ entry, relative, temporary });
    }
    // Reading back a large part file takes a while: it shows, as a phase of its own.
    const sizes = bound.map(({ temporary }) => bytesOfPartFiles([temporary]));
    const checking = input.onProgress
      ? new PhaseProgress(
          'checking',
          bound.length,
          sizes.reduce((sum, size) => sum + size, 0),
          input.onProgress,
          () => performance.now(),
        )
      : undefined;
    for (const [at, { entry, relative, temporary }] of bound.entries()) {
      let kept: KeptLeaves = { leaves: 0, bytes: 0 };
      let read = 0;
      // Only a file whose bytes are all its leaves', as the spec lays files out: a node's own
      // bytes would come between them.
      let leafBytes = 0;
      for (const leaf of leafCidsOf(entry.cid, entry.fileNode)) leafBytes += leafSize(leaf);
      if (!isThere(entry) && leafBytes === fileSizeOf(entry.cid, entry.fileNode))
        try {
          kept = await keptLeaves(
            temporary,
            (function* sizedLeaves() {
              for (const cid of leafCidsOf(entry.cid, entry.fileNode))
                yield { cid, size: index.leaves.sizeOf(cid) };
            })(),
            (bytes) => {
              read += bytes;
              checking?.addBytes(bytes);
            },
          );
        } catch (error) {
          // Gone since, or unreadable: the file is fetched whole, and the part file removed
          // where it can be.
          const code = systemErrorCode(error);
          // ELOOP: a link put in its place (the file is opened with O_NOFOLLOW).
          const unusable =
            code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'ELOOP';
          if (!unusable && code !== 'EIO' && !isOutOfReach(error))
            throw restoreError(error, input.targetDir);
        }
      // What was not read of it (past a leaf that did not match) is done with too.
      checking?.addBytes(Math.max(0, (sizes[at] ?? 0) - read));
      checking?.addFile();
      if (kept.leaves > 0) {
        found.set(relative, { temporary, ...kept });
        continue;
      }
      try {
        rmSync(temporary, { force: true });
      } catch (error) {
        // Where it cannot be removed now (its folder read-only again), it is left for the
        // tidying after stopped restores.
        if (!isOutOfReach(error)) throw restoreError(error, input.targetDir);
      }
    }
    checking?.finish();
    return found;
  };
  /** The part-written files gone on with, by their files' paths below the target. */
  const continued = await continuedFiles(input.partFiles);
  /** The leaves a part-written file holds for the file at `relative`, or 0. */
  const keptOf = (relative: string): number =>
    continued.size === 0 ? 0 : (continued.get(relative)?.leaves ?? 0);
  // The tree is walked twice, lazily: once here for the leaf reads to fetch ahead, once below
  // for the writes. Holding a plan of the whole tree instead grew with the number of files.
  const leaves = new LeafFetcher(
    input.client,
    input.storageHost,
    index.leaves,
    (function* leafReads(): Generator<string> {
      for (const entry of restored())
        if (entry.kind === 'file' && !isThere(entry))
          yield* fetchedLeavesOf(entry.cid, entry.fileNode, keptOf(relativeOf(entry)));
    })(),
  );
  /** The leaves of the files written again (writeFilesAgain), once they are. */
  let leavesAgain: LeafFetcher | undefined;
  /**
   * `fetcher`'s leaves for a file whose first leaf read is planned read number `firstRead`,
   * after its first `kept`, which its part-written file holds.
   */
  const dagReading = (fetcher: LeafFetcher, firstRead: number, kept = 0): FileDag => {
    let read = firstRead;
    let toKeep = kept;
    return {
      node: (cid) => index.nodes.get(cid),
      leaf: (cid) => {
        if (toKeep > 0) {
          toKeep -= 1;
          return Promise.resolve(new KeptLeaf(leafSize(cid)));
        }
        return isHole(cid) ? Promise.resolve(new Hole(CHUNK_BYTES)) : fetcher.take(cid, read++);
      },
    };
  };
  /** Leaf reads planned before the next file's first. */
  let readsBefore = 0;
  /**
   * The files to write and their bytes: into a target that holds none of them, as counted
   * above; anything else is a walk of the tree, only when asked (2.3 s before the first file,
   * for 400 000 files).
   */
  let progress: PhaseProgress<'restoring'> | undefined;
  if (input.onProgress) {
    const totals =
      (alreadyThere.size === 0 ? wantedTotals : undefined) ??
      totalsOfEntries(restored(), isThere, (entry) => fileSizeOf(entry.cid, entry.fileNode));
    let keptBytes = 0;
    for (const { bytes } of continued.values()) keptBytes += bytes;
    progress = new PhaseProgress(
      'restoring',
      totals.files,
      totals.bytes - keptBytes,
      input.onProgress,
      () => performance.now(),
    );
  }

  const inFlight = new Set<Promise<void>>();
  /** The writes under way, by folded name: a name that may be the same waits for its write. */
  const claimed = new Map<string, Promise<void>>();
  /** Whether a file of this folded name is being written or waits for its rename. */
  const nameTaken = (folded: string): boolean => claimed.has(folded) || renames.has(folded);
  /**
   * Where each restored folder went, by its path below the target: one whose name a file or a
   * link held was restored beside it under a free name, and what it holds goes there too.
   */
  const folders = new Map<string, string>([['', input.targetDir]]);
  /** Folders the target refused, by their path below the target: what they hold is skipped. */
  const refusedFolders = new Set<string>();
  /**
   * The folders this restore made, the target among them if it was not there. A file going
   * into one is not looked for first: nothing of the user's was there to keep, and a name
   * taken meanwhile (a file saved there by another program, or one of the same name on a disk
   * that ignores case) is found all the same when the file is put in place (place-file.ts).
   * That look was 1.2 s of a 17 s restore of 100 000 small files into a new folder.
   */
  const madeFolders = new Set<string>(targetExisted ? [] : [input.targetDir]);
  /**
   * A free name for `destination`, recorded as a rename; `notReplacedBecause`: why what has its
   * name is kept though the restore was to replace it.
   */
  const renamed = (destination: string, kind: EntryKind, notReplacedBecause?: string): string => {
    const free = freeName(destination, kind, nameTaken);
    noteRenamed(destination, free);
    if (notReplacedBecause !== undefined) placing.notReplaced(destination, notReplacedBecause);
    return free;
  };
  /** Takes back the rename `renamed` told of `free`, whose entry was not restored after all. */
  const unlistRenamed = (free: string): void => {
    const as = path.relative(input.targetDir, free);
    const at = result.restoredBeside.findLastIndex((item) => item.as === as);
    if (at >= 0) result.restoredBeside.splice(at, 1);
  };
  /**
   * Where a folder goes beside what has its name: into the folder a restore before made there
   * (restored-copies.ts), else under a free name; `notReplacedBecause` as for `renamed`.
   */
  const besideFolder = (
    destination: string,
    notReplacedBecause?: string,
  ): { folder: string; existed: boolean } => {
    const copy = restoredFolderCopy(destination);
    if (copy === undefined)
      return { folder: renamed(destination, 'folder', notReplacedBecause), existed: false };
    noteRenamed(destination, copy);
    if (notReplacedBecause !== undefined) placing.notReplaced(destination, notReplacedBecause);
    return { folder: copy, existed: true };
  };
  /**
   * Where a folder goes: its own name, unless a file or a link has it, replaced only if asked;
   * and whether a folder was there already.
   */
  const folderPlace = (destination: string): { folder: string; existed: boolean } => {
    const existing = lstatUnlessRefused(destination);
    if (!existing || existing.isDirectory())
      return { folder: destination, existed: existing !== undefined };
    if (!input.overwrite) return besideFolder(destination);
    if (!mayReplace(destination, existing))
      return besideFolder(destination, OTHERS_IN_STICKY_FOLDER);
    opened.openIfClosed(path.dirname(destination));
    try {
      // Not rmSync: told EPERM, it tries the name as a folder, and reports ENOTDIR instead.
      unlinkSync(destination);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error;
      return besideFolder(destination, REPLACING_REFUSED);
    }
    return { folder: destination, existed: false };
  };
  let failure: Error | undefined;
  /** Stops the restore with `error`, unless it stopped already; reported once all settled. */
  const stop = (error: unknown): void => {
    failure ??= restoreError(error, input.targetDir, sparseWouldHelp);
    // Files waiting for a leaf that is no longer fetched would wait forever.
    leaves.stop(failure);
    leavesAgain?.stop(failure);
  };
  /**
   * Waits until no file of this folded name is being written or waits for its rename, so that
   * what is on disk under that name is all there will be.
   */
  const nameSettled = async (folded: string): Promise<void> => {
    const writing = claimed.get(folded);
    if (writing) await writing;
    if (renames.has(folded)) await renames.renameWritten();
  };
  /**
   * Files left out for a leaf that did not match its CID as it was written, with where they were
   * to go: written again, with their leaves fetched anew, once the others are written.
   */
  const writeAgain: FileToWriteAgain[] = [];
  /**
   * Runs `work` among the writes in flight; a refused entry is listed, anything else stops. With
   * `again`, a file whose leaf did not match as it was written is kept for writeAgain instead.
   */
  const track = (
    work: Promise<void>,
    relative: string,
    again?: Omit<FileToWriteAgain, 'damagedCid'>,
  ): Promise<void> => {
    const settled: Promise<void> = work
      .catch((error: unknown) => {
        const damagedCid = leafDamagedAsWritten(error);
        if (again && (damagedCid !== undefined || error instanceof PartFileUnusable)) {
          writeAgain.push({ ...again, damagedCid });
          return;
        }
        if (damagedCid !== undefined) result.unavailable.push({ cid: damagedCid, why: 'damaged' });
        if (error instanceof EntryNotRestoredError) {
          result.notRestored.push({ path: relative, reason: error.reason });
          return;
        }
        stop(error);
      })
      .finally(() => inFlight.delete(settled));
    inFlight.add(settled);
    return settled;
  };
  const { signal } = input;
  const stopNow = (): void => {
    if (signal) stop(stoppedError(signal));
  };
  /**
   * Settles the name of a file and starts writing it there: `destination` unless something is
   * in the way. Its leaves come through `dag`. False when the restore stopped meanwhile.
   * `again` is the file's first try when this is its second; a first try whose leaf does not
   * match as it is written is kept for writeAgain.
   */
  const startFile = async (
    entry: TreeEntry,
    destination: string,
    relative: string,
    dag: FileDag,
    again?: FileToWriteAgain,
    partial?: ContinuedFile,
  ): Promise<boolean> => {
    // Names are settled here, in order, before the write starts: a file still being written or
    // renamed must count as taken, or two entries could be renamed onto one name. One that may
    // be the same name on a disk that ignores case is written and renamed first, so the check
    // below sees it. A file written again goes where its first try was to go, if it still can.
    let target = again?.target ?? destination;
    const sameName = foldedName(target);
    if (nameTaken(sameName)) await nameSettled(sameName);
    if (failure !== undefined) return false;
    const keeper = madeFolders.has(path.dirname(target))
      ? undefined
      : keeperOf(target, input.overwrite);
    if (keeper !== undefined)
      target = renamed(
        destination,
        'file or link',
        keeper === 'theirs' ? OTHERS_IN_STICKY_FOLDER : undefined,
      );
    const folded = foldedName(target);
    const place = path.join(input.targetDir, relative);
    const written = restoreFile(entry, target, dag, place, partial).then(
      (file) => {
        if (!file) return;
        if (again?.damagedCid !== undefined) result.wholeOnRetry.push(again.damagedCid);
        renames.add({ ...file, relative, folded });
        filesWritten += 1;
        input.afterFileWritten?.(filesWritten);
      },
      (error: unknown) => {
        // Not restored beside what kept its name after all: it is told as not restored.
        if (keeper !== undefined && error instanceof EntryNotRestoredError) unlistRenamed(target);
        throw error;
      },
    );
    const writing = track(
      written,
      relative,
      again ? undefined : { entry, destination, target, relative },
    ).finally(() =>
      // Written and waiting for its rename, or failed: `renames` holds the name from here.
      claimed.delete(folded),
    );
    claimed.set(folded, writing);
    return true;
  };
  /**
   * Writes the files of writeAgain once more, with their leaves fetched anew, each where its
   * first try was to go. One whose leaf does not match again is left out.
   */
  const writeFilesAgain = async (): Promise<void> => {
    const files = writeAgain.splice(0);
    const fetcher = new LeafFetcher(
      input.client,
      input.storageHost,
      index.leaves,
      (function* leafReadsAgain(): Generator<string> {
        for (const { entry } of files) yield* fetchedLeavesOf(entry.cid, entry.fileNode);
      })(),
    );
    leavesAgain = fetcher;
    let readsBeforeAgain = 0;
    for (const file of files) {
      if (signal?.aborted === true) {
        stopNow();
        return;
      }
      if (inFlight.size >= FILES_IN_FLIGHT) await Promise.race(inFlight);
      if (failure !== undefined) return;
      const dag = dagReading(fetcher, readsBeforeAgain);
      readsBeforeAgain += countOf(fetchedLeavesOf(file.entry.cid, file.entry.fileNode));
      if (!(await startFile(file.entry, file.destination, file.relative, dag, file))) return;
    }
  };
  signal?.addEventListener('abort', stopNow, { once: true });
  try {
    for (const entry of restored()) {
      if (signal?.aborted === true) {
        stopNow();
        break;
      }
      const parts = entry.parts;
      for (const part of parts) checkName(part);
      matched = true;
      const relative = relativeOf(entry);
      if (isThere(entry)) {
        const copy = alreadyThere.get(relative);
        if (copy === undefined) result.alreadyThere += 1;
        else result.restoredBefore.push({ path: relative, as: copy });
        continue;
      }
      const parent = path.posix.dirname(relative);
      const parentKey = parent === '.' ? '' : parent;
      const underRefused = relative !== '' && refusedFolders.has(parentKey);
      const destination =
        relative === ''
          ? input.targetDir
          : path.join(
              folders.get(parentKey) ?? path.join(input.targetDir, parent),
              path.posix.basename(relative),
            );
      if (entry.kind === 'directory') {
        if (underRefused) {
          refusedFolders.add(relative);
          continue;
        }
        let place = { folder: destination, existed: targetExisted };
        // A file still being written may have this name on a disk that ignores case.
        const folded = foldedName(destination);
        if (nameTaken(folded)) await nameSettled(folded);
        if (failure !== undefined) break;
        try {
          if (relative !== '') place = folderPlace(destination);
          if (!place.existed) opened.openIfClosed(path.dirname(place.folder));
          await makeFolders(place.folder, modeWhileFilled(entry.mode), folderMade);
        } catch (error) {
          const refusal = relative === '' ? error : refusalOf(error, place.folder, 'name');
          if (refusal instanceof EntryNotRestoredError) {
            if (place.folder !== destination && !place.existed) unlistRenamed(place.folder);
            refusedFolders.add(relative);
            result.notRestored.push({
              path: relative,
              reason: `${refusal.reason}; nothing in this folder was restored`,
            });
            continue;
          }
          stop(error);
          break;
        }
        const { folder, existed } = place;
        folders.set(relative, folder);
        if (!existed) madeFolders.add(folder);
        // A folder that was there keeps its mode and mtime, as a file that was there keeps its
        // content, unless asked; the target itself always does.
        // Only such a folder counts as restored: one left as it was is not told as restored
        // again by each restore into the same place.
        if (!existed || (input.overwrite && relative !== '')) {
          directoryTimes.push({ dir: folder, mode: entry.mode, mtime: entry.mtimeNanoseconds });
          result.directories += 1;
        }
        continue;
      }
      if (underRefused && entry.kind !== 'file') continue;
      // Files are written a few at a time: each waits on its own fsync, and the disk takes
      // several at once about as fast as one. Their folders exist already (parents come first).
      if (inFlight.size >= FILES_IN_FLIGHT) await Promise.race(inFlight);
      if (failure !== undefined) break;
      const partial = continued.size === 0 ? undefined : continued.get(relative);
      const dag = dagReading(leaves, readsBefore, partial?.leaves);
      if (entry.kind === 'file')
        readsBefore += countOf(fetchedLeavesOf(entry.cid, entry.fileNode, partial?.leaves));
      if (underRefused) {
        // Its leaf reads are planned, and the files after it wait for them to be taken.
        void track(discardFile(entry.cid, dag, leafSize), relative);
        continue;
      }
      try {
        opened.openIfClosed(path.dirname(destination));
      } catch (error) {
        stop(error);
        break;
      }
      if (!(await startFile(entry, destination, relative, dag, undefined, partial))) break;
    }
    // The files to write again are known once every first write has settled.
    await Promise.all(inFlight);
    if (failure === undefined && writeAgain.length > 0) await writeFilesAgain();
  } finally {
    // Every write settles, and every whole file gets its name, before the first failure is
    // reported: none is left running, nor left under its temporary name.
    signal?.removeEventListener('abort', stopNow);
    await Promise.all(inFlight);
    await renames.renameWritten();
    leaves.close();
    leavesAgain?.close();
    flush?.close();
    await slots?.close();
  }
  if (failure !== undefined) throw failure instanceof Error ? failure : new Error(String(failure));
  if (!matched) throw notInVersion(input.subPath ?? '', wanted, root, index.nodes);
  progress?.finish();
  // One by one, not spread into push: a version whose blocks the host lost lists one for each
  // of them, and hundreds of thousands of arguments overflow the stack.
  for (const fetcher of [leaves, leavesAgain]) {
    for (const cid of fetcher?.wholeOnRetry ?? []) result.wholeOnRetry.push(cid);
    for (const report of fetcher?.unavailable ?? []) result.unavailable.push(report);
  }
  result.notRestored.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  // Deepest first, after their contents, so writing files does not change them again.
  for (const { dir, mode, mtime } of directoryTimes.reverse()) {
    // Only one that was there can be: the restore made the others, as this user.
    if (!mayChangeLook(lstatSync(dir))) {
      result.foldersOfOthers += 1;
      result.directories -= 1;
      continue;
    }
    if (mode !== undefined) {
      opened.modeGivenBy(dir);
      keepMode(dir, mode);
    }
    if (mtime !== undefined) await utimes(dir, fileTime(mtime), fileTime(mtime));
  }
  return {
    ...result,
    renamed: result.restoredBeside.map((item) => item.as),
    ownersFromFolders: owners?.given ?? 0,
  };
}
