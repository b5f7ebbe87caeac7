import { accessSync, constants, type Stats } from 'node:fs';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { EngineError, isEngineError } from '../api/index.ts';
import { RAW_CODEC } from '../protocol/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { entriesAlreadyThere } from './already-there.ts';
import { fileLeaves } from './file-leaves.ts';
import { nearestFolderThere } from './nearest-folder.ts';
import { notInVersion } from './not-in-version.ts';
import { closedOnlyByItsMode } from './opened-folders.ts';
import { lstatUnlessRefused } from './refused-entry.ts';
import { mayReplace } from './replaceable.ts';
import { FolderPlaces, restoredFolderCopy, type RestoredAs } from './restored-copies.ts';
import { checkRoomForRestore } from './room-for-restore.ts';
import { checkName } from './safe-name.ts';
import { lookAtTarget } from './target-folder.ts';
import { checkedTreeTotals } from './tree-totals.ts';
import { versionPathParts } from './version-path.ts';
import { directoryLinks, walkTree, type TreeEntry } from './walk-tree.ts';
import { writeRefusalReason } from './write-refusal.ts';
import { zeroChunkCid } from './zero-chunk.ts';

// What a restore would do, told before it does it (`canopy restore --dry-run`): what it would
// write, what the target holds already as the version has it, what is in the way there and
// would be kept with the version's entry restored beside it (or replaced, with --overwrite),
// and whether the restore would be refused for room. Nothing is fetched or written: the tree
// comes from the metadata CAR, and the target is only looked at. A restore into a folder that
// holds much of the version (where it was backed up from) tells here how many " (restored)"
// copies it would leave beside the user's files.
//
// The rules are restore-version.ts's: a file or link is never put in place of a folder; without
// --overwrite nothing there is replaced, and what the target holds byte for byte is left as it
// is; a folder goes beside a file or link of its name, and what it holds goes with it.

export interface RestorePlan {
  /** What the restore would write: files (and their bytes), folders and links it would make. */
  readonly files: number;
  readonly bytes: number;
  readonly directories: number;
  readonly symlinks: number;
  /** Files and links the target holds already as the version has them: left, and not fetched. */
  readonly alreadyThere: number;
  /**
   * Files and links held already in a restored copy beside what kept their name (a restore
   * before put them there): left, and not fetched or copied again.
   */
  readonly restoredBefore: readonly RestoredAs[];
  /** Paths below the target holding something else, kept: the version's goes beside it. */
  readonly beside: readonly string[];
  /** Paths below the target holding a file or link the version's would replace (--overwrite). */
  readonly replaced: readonly string[];
  /** Why the restore would be refused before it wrote anything; null when it would not be. */
  readonly refusedBecause: string | null;
}

export interface RestorePlanInput {
  readonly tree: TreeIndex;
  readonly targetDir: string;
  /** Only this path of the version, as a user gives it (version-path.ts); undefined: all. */
  readonly subPath?: string;
  readonly overwrite: boolean;
  readonly sparse?: boolean;
  /** Bytes part-written files there hold, which the restore would go on with (part-files.ts). */
  readonly keptBytes?: number;
}

/** What restoreVersion would do with `input`, looking at the target only. */
export async function planRestore(input: RestorePlanInput): Promise<RestorePlan> {
  const { tree, targetDir } = input;
  const root = CID.asCID(tree.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  const wanted = versionPathParts(input.subPath, tree.manifest['source_label']);
  const totals = checkedTreeTotals(tree.manifest, root, tree.nodes, wanted, 'restored');
  if (!totals) throw notInVersion(input.subPath ?? '', wanted, root, tree.nodes);
  const target = lookAtTarget(targetDir);
  const folderThere = target.stats?.isDirectory() === true;
  let refusedBecause = target.refusedBecause ?? writeRefusal(targetDir) ?? null;
  // A target the restore stops at is not looked into: what it would write is told as for an
  // empty one.
  const lookInTarget = folderThere && refusedBecause === null;
  if (refusedBecause === null)
    try {
      checkRoomForRestore({
        targetDir,
        targetExisted: folderThere,
        names: () =>
          wanted.length === 0
            ? (directoryLinks(root, tree.nodes) ?? []).map((link) => link.name)
            : wanted.slice(-1),
        totals,
        sparse: input.sparse === true,
        sparseWouldHelp: input.sparse !== true && tree.leaves.has(zeroChunkCid()),
        ...(input.keptBytes === undefined ? {} : { keptBytes: input.keptBytes }),
      });
    } catch (error) {
      if (!isEngineError(error, 'disk_full')) throw error;
      refusedBecause = error.message;
    }
  const relativeOf = (entry: TreeEntry): string =>
    entry.parts.slice(Math.max(0, wanted.length - 1)).join('/');
  const entries = function* (): Generator<{ entry: TreeEntry; relative: string }> {
    for (const entry of walkTree(root, tree.nodes, wanted)) {
      // Before any name is looked up in the target: a hostile one would lead out of it.
      for (const part of entry.parts) checkName(part);
      yield { entry, relative: relativeOf(entry) };
    }
  };
  /** A file's size as its root states it: a File node's, or a raw leaf's (another tool's tree). */
  const fileSize = (entry: TreeEntry): number =>
    entry.fileNode
      ? Number(entry.fileNode.unixfs.fileSize())
      : entry.cid.code === RAW_CODEC
        ? (tree.leaves.sizeOf(entry.cid) ?? 0)
        : 0;
  try {
    const alreadyThere =
      lookInTarget && !input.overwrite
        ? await entriesAlreadyThere(entries(), targetDir, (entry) => ({
            size: fileSize(entry),
            leaves: () => fileLeaves(entry.cid, tree.nodes, entry.fileNode),
            leafSize: (leaf) => tree.leaves.sizeOf(leaf),
          }))
        : new Map<string, string | undefined>();
    const plan = {
      files: 0,
      bytes: 0,
      directories: 0,
      symlinks: 0,
      alreadyThere: 0,
      restoredBefore: [] as RestoredAs[],
      beside: [] as string[],
      replaced: [] as string[],
      refusedBecause,
    };
    /** Whether the restore replaces `existing`, in the way of the entry at `place`. */
    const replaces = (place: string, existing: Stats): boolean =>
      input.overwrite && mayReplace(place, existing);
    /** Folders of the version the target lacks, or that go beside what has their name. */
    const newFolders = new Set<string>();
    const folders = new FolderPlaces(targetDir);
    for (const { entry, relative } of entries()) {
      const parent = path.posix.dirname(relative);
      const inNewFolder = newFolders.has(parent === '.' ? '' : parent);
      const place = relative === '' ? targetDir : folders.placeOf(relative);
      const existing =
        !lookInTarget || inNewFolder
          ? undefined
          : relative === ''
            ? target.stats
            : lstatUnlessRefused(place);
      if (entry.kind === 'directory') {
        if (existing?.isDirectory() === true) {
          folders.set(relative, place);
          continue;
        }
        const replaced = existing !== undefined && replaces(place, existing);
        if (existing) (replaced ? plan.replaced : plan.beside).push(relative);
        // Beside a file of its name, the folder a restore before made there is filled again.
        const copy = existing && !replaced ? restoredFolderCopy(place) : undefined;
        if (copy !== undefined) {
          folders.set(relative, copy);
          continue;
        }
        newFolders.add(relative);
        plan.directories += 1;
        continue;
      }
      if (alreadyThere.has(relative)) {
        const copy = alreadyThere.get(relative);
        if (copy === undefined) plan.alreadyThere += 1;
        else plan.restoredBefore.push({ path: relative, as: copy });
        continue;
      }
      if (entry.kind === 'file') {
        plan.files += 1;
        plan.bytes += fileSize(entry);
      } else plan.symlinks += 1;
      if (existing)
        (replaces(place, existing) && !existing.isDirectory() ? plan.replaced : plan.beside).push(
          relative,
        );
    }
    return plan;
  } catch (error) {
    throw lookRefusal(error);
  }
}

/**
 * A folder in the target this user may not look into (its writable parent notwithstanding),
 * told as such; anything else as it came.
 */
function lookRefusal(error: unknown): unknown {
  const { code, path: failed } = error as NodeJS.ErrnoException;
  if ((code !== 'EACCES' && code !== 'EPERM') || failed === undefined) return error;
  return new EngineError(
    'permission_denied',
    `cannot look in ${path.dirname(failed)}: permission denied`,
    { cause: error },
  );
}

/**
 * Why the restore could not write into `targetDir`, as it would tell it (restore-version.ts), or
 * undefined when it may: the target, or the folder it would be made in, is this user's to write
 * (or their own, to open) on a disk mounted writable.
 */
function writeRefusal(targetDir: string): string | undefined {
  const folder = nearestFolderThere(targetDir);
  try {
    accessSync(folder, constants.W_OK);
    return undefined;
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    // The user's own read-only folder is opened for the while (opened-folders.ts).
    if (code === 'EACCES' && closedOnlyByItsMode(folder)) return undefined;
    const reason = writeRefusalReason(code);
    if (reason === undefined) throw error;
    return `cannot write in ${folder}: ${reason}`;
  }
}
