import { lstatSync, rmSync } from 'node:fs';
import path from 'node:path';
import { giveModesBack, isOutOfReach, removeLeftTemporaries } from '../restore/index.ts';
import { RestoreMark, type PartFile } from '../state/index.ts';

// A restore killed or stopped part-way leaves files under temporary names. Most are removed by
// the next restore or backup; the large ones it noted as part files (part-files.ts) stay, for
// the next restore into the same folder to go on with, for PART_FILES_KEPT_FOR_MS after the
// last was noted. Past that, a folder the user never restored into again would hold them for
// good, and they go too.

/** How long after its last one was noted a stopped restore's part files are kept. */
export const PART_FILES_KEPT_FOR_MS = 7 * 24 * 60 * 60 * 1000;

/** A stopped restore whose part files are handed to a restore into its folder, its mark held. */
export interface HandedOverRestore {
  readonly mark: RestoreMark;
  readonly target: string;
  readonly partFiles: readonly PartFile[];
}

export interface TidiedRestores {
  /** Files removed. */
  readonly removed: number;
  /**
   * The stopped restores into the folder a restore goes on in (`resumeInto`) that left part
   * files, each held until that restore ends (handOverEnded).
   */
  readonly handedOver: readonly HandedOverRestore[];
}

/** Whether a part file a mark names is one of a restore's temporaries in its target. */
function isTemporaryIn(target: string, file: string): boolean {
  const relative = path.relative(target, file);
  return (
    relative !== '' &&
    !relative.startsWith('..') &&
    !path.isAbsolute(relative) &&
    path.basename(file).startsWith('.canopy-restore-')
  );
}

/** The part files of `partFiles` that are there, as files. */
function partFilesThere(partFiles: readonly PartFile[]): PartFile[] {
  return partFiles.filter(
    ({ temporary }) => lstatSync(temporary, { throwIfNoEntry: false })?.isFile() === true,
  );
}

/** How many part files there are of `partFiles`, and their bytes. */
function countedPartFiles(partFiles: readonly PartFile[]): { files: number; bytes: number } {
  let bytes = 0;
  const there = partFilesThere(partFiles);
  for (const { temporary } of there)
    bytes += lstatSync(temporary, { throwIfNoEntry: false })?.size ?? 0;
  return { files: there.length, bytes };
}

/**
 * The part files a restore into `target` that failed or was stopped (its mark held here) keeps
 * for the next restore there, and their bytes: what its failure tells.
 */
export function partFilesKept(mark: RestoreMark, target: string): { files: number; bytes: number } {
  return countedPartFiles(
    mark.partFiles().files.filter((file) => isTemporaryIn(target, file.temporary)),
  );
}

/**
 * The part files stopped restores into `target` keep for the next restore there, and their
 * bytes, as a dry run tells them: each stopped restore's mark is held only while it is read.
 */
export function partFilesWaitingIn(
  home: string,
  target: string,
  now = Date.now(),
): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  for (const { mark, target: into } of RestoreMark.stopped(home)) {
    try {
      if (into !== target || now - mark.partFiles().notedAt >= PART_FILES_KEPT_FOR_MS) continue;
      const kept = partFilesKept(mark, target);
      files += kept.files;
      bytes += kept.bytes;
    } finally {
      mark.release();
    }
  }
  return { files, bytes };
}

/**
 * Removes a stopped restore's files under temporary names but `keep`, and those part files it
 * noted under another's (part files it went on with), then gives back their modes the
 * read-only folders it had opened. Whether nothing is left for a later run to look at.
 */
function tidyStopped(
  mark: RestoreMark,
  target: string,
  partFiles: readonly PartFile[],
  keep: ReadonlySet<string>,
): { removed: number; allDone: boolean } {
  const left = removeLeftTemporaries(target, mark.token, keep);
  let removed = left.removed;
  let someLeft = left.someLeft;
  for (const { temporary } of partFiles) {
    if (keep.has(temporary) || !isTemporaryIn(target, temporary)) continue;
    try {
      rmSync(temporary);
      removed += 1;
    } catch (error) {
      const { code } = error as NodeJS.ErrnoException;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      if (!isOutOfReach(error)) throw error;
      someLeft = true;
    }
  }
  // After the temporaries: the folders it opened let them be removed.
  return { removed, allDone: !someLeft && giveModesBack(mark.openedFolders()) && keep.size === 0 };
}

/**
 * Tidies after a restore into `target` that stopped part-way (its mark held here): removes the
 * files it left under temporary names, but its part files while they are kept, then gives back
 * their modes the read-only folders it opened. Returns how many files it removed, the part
 * files kept, and whether nothing is left for a later run to look at (its mark may end).
 */
export function tidyAfterStop(
  mark: RestoreMark,
  target: string,
  now = Date.now(),
): { removed: number; partFiles: PartFile[]; allDone: boolean } {
  const { files, notedAt } = mark.partFiles();
  const partFiles =
    now - notedAt < PART_FILES_KEPT_FOR_MS
      ? partFilesThere(files.filter((file) => isTemporaryIn(target, file.temporary)))
      : [];
  const keep = new Set(partFiles.map((file) => file.temporary));
  return { ...tidyStopped(mark, target, files, keep), partFiles };
}

/**
 * Tidies after the restores that were killed or stopped part-way, wherever they were restoring
 * to: removes the files they left under their temporary names, but their part files while they
 * are kept, then gives back their modes the read-only folders they had opened to write into.
 * Those into `resumeInto` that left part files are handed over, with their marks held. A
 * stopped restore's mark stays while something of it is left (part files, or a target whose
 * disk is not mounted, or a folder that cannot be read), so that a later run looks again.
 */
export function tidyStoppedRestores(
  home: string,
  resumeInto?: string,
  now = Date.now(),
): TidiedRestores {
  let removed = 0;
  const handedOver: HandedOverRestore[] = [];
  for (const { mark, target } of RestoreMark.stopped(home)) {
    let handed = false;
    try {
      const tidied = tidyAfterStop(mark, target, now);
      const { partFiles } = tidied;
      removed += tidied.removed;
      if (tidied.allDone) mark.end();
      else if (partFiles.length > 0 && target === resumeInto) {
        handedOver.push({ mark, target, partFiles });
        handed = true;
      }
    } finally {
      if (!handed) mark.release();
    }
  }
  return { removed, handedOver };
}

/**
 * Lets go of what `handedOver` held once the restore it was handed to ended, however it ended.
 * That restore went on with the part files bound for the places of the files it wrote, and
 * removed those it could not go on with (restoreVersion); a stopped restore whose part files
 * are all gone then ends, and one whose others are left stays, for a later restore.
 */
export function handOverEnded(handedOver: readonly HandedOverRestore[]): void {
  for (const { mark, target, partFiles } of handedOver) {
    try {
      const left = partFilesThere(partFiles).map((file) => file.temporary);
      if (tidyStopped(mark, target, partFiles, new Set(left)).allDone) mark.end();
    } finally {
      mark.release();
    }
  }
}
