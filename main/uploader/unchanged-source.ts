import { MetadataFloor } from '../packer/index.ts';
import type { ExcludeRules } from '../scanner/index.ts';
import {
  sourceRootEntry,
  walkSource,
  type SourceEntry,
  type WalkOptions,
} from '../scanner/index.ts';
import {
  folderOf,
  type IndexedEntry,
  type MovedFileQuery,
  type RestoredFiles,
  type SourceFileIndex,
} from '../state/index.ts';

// Compares a source with its file index in one walk. A source has not changed since the
// version the index describes when every entry the walk finds is in the index with the same
// kind, mode, mtime and inode (and a file's size and ctime, a symlink's target), and nothing
// else is.
//
// A file's ctime, the time its inode last changed, is what no program can set back. Its mtime
// can be: npm writes every file of a package with the mtime of 1985-10-26, and tar, rsync and
// cp -p give a copy the original's. A package.json going from version 1.0.0 to 1.0.1 kept its
// size, mtime and inode, and a backup found nothing changed; the version held the old bytes.
// With the ctime compared too (as restic and borg do), a file is read again also after a chmod
// or a new hard link, which change only its ctime: a read that finds the same bytes sends none.
//
// The walk goes on to the end, and notes each folder that holds a difference, however deep:
// packing then walks only those, and reuses every other folder's node from the version the
// index describes (one changed file among 100 000 cost 8-9 s when packing walked them all).
// The same walk gives the reading phase its totals.

/**
 * A source whose index holds at least this many entries is walked with a worker thread listing
 * ahead of the walk (stat-ahead-reader.ts): a smaller one is walked before it would have started.
 */
export const WALK_AHEAD_FROM_ENTRIES = 10_000;

/** Whether the walk found `found` as the index describes it. */
export function sameEntry(found: SourceEntry, known: IndexedEntry | undefined): boolean {
  if (!known || known.kind !== found.kind) return false;
  if (known.mode !== found.mode || known.mtimeNs !== found.mtimeNs || known.ino !== found.ino)
    return false;
  switch (found.kind) {
    case 'file':
      return known.size === found.size && known.ctimeNs === found.ctimeNs;
    case 'symlink':
      return known.target === found.target;
    case 'directory':
      return true;
  }
}

/** What tells a file unchanged since it was last looked at: its size, mtime, ctime and inode. */
export interface FileLook {
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly ino: bigint;
}

/**
 * A file packing need not read again: its index entry still has its size, mtime, ctime and
 * inode.
 */
export function indexVouchesFor(
  found: FileLook,
  known: IndexedEntry | undefined,
): known is IndexedEntry & { readonly kind: 'file'; readonly cid: string } {
  return (
    known?.kind === 'file' &&
    known.cid !== null &&
    known.size === found.size &&
    known.mtimeNs === found.mtimeNs &&
    known.ctimeNs === found.ctimeNs &&
    known.ino === found.ino
  );
}

/**
 * The index entry that vouches for the file `found`, whose own path's entry is `known`: that
 * one, or else the entry it had before its folder was renamed or moved.
 */
export function vouchingEntry(
  index: SourceFileIndex,
  found: MovedFileQuery,
  known: IndexedEntry | undefined,
): (IndexedEntry & { readonly kind: 'file'; readonly cid: string }) | undefined {
  if (indexVouchesFor(found, known)) return known;
  const moved = index.movedFile(found);
  return indexVouchesFor(found, moved) ? moved : undefined;
}

/**
 * Records besides a source's own file index that may vouch for a file it does not know, by the
 * file's path below the source and its size, mtime, ctime and inode, as the index would:
 * - the files restores wrote into the source (state/restored-files.ts);
 * - the file index of the folder the bucket was backed up from until now, when this folder has
 *   none: a folder renamed or moved on its disk keeps its files' inodes, and a backup of it
 *   under its new name (`--replace-source`) read every one of them again.
 */
export interface OtherVouchers {
  readonly restored?: RestoredFiles;
  /** The index of the folder the bucket's active version was backed up from, here. */
  readonly former?: SourceFileIndex;
}

/** What vouches for a file: its leaf list, or else its File node (in the active version). */
export type Vouched = Pick<IndexedEntry, 'leaves' | 'cid'>;

/** What one of `others` vouches for the file `found`, if one does. */
export function vouchedElsewhere(
  others: OtherVouchers,
  found: FileLook & { readonly path: string },
): Vouched | undefined {
  const { former, restored } = others;
  const formerEntry = former && vouchingEntry(former, found, former.lookup(found.path));
  if (formerEntry) return formerEntry;
  const left = restored?.unchangedAt(found.path, found);
  return left ? { leaves: left.leaves, cid: null } : undefined;
}

export interface SourceSurvey {
  /** Every entry matches the index, and the index holds no other. */
  readonly unchanged: boolean;
  readonly files: number;
  readonly bytes: number;
  /** The files packing must read, those the index cannot vouch for, and their bytes. */
  readonly filesToRead: number;
  readonly bytesToRead: number;
  /**
   * The folders holding a difference somewhere under them ('' the source folder), and the
   * paths the walk skipped (a folder it could not list is one); null when the index describes
   * no version. Any other folder the walk found is, with everything under it, as the index
   * describes it.
   */
  readonly changedFolders: ReadonlySet<string> | null;
  /** The least the version's metadata CAR would hold (metadata-floor.ts). */
  readonly metadataFloorBytes: number;
}

export interface SurveyOptions {
  /** Called with each file found, for progress. */
  readonly onFile?: (bytes: number) => void;
  /** Records besides the index: a file one vouches for needs no read either. */
  readonly others?: OtherVouchers;
  /** Told what the walk passes over, as walkSource tells it (a dry run lists them). */
  readonly passedOver?: Partial<Pick<WalkOptions, 'onSkip' | 'onExcluded'>>;
  /**
   * The most metadata a version holds; with `stop`, the walk ends once the floor passes it
   * (the backup is refused: what else it would find does not matter).
   */
  readonly metadataLimit?: { readonly bytes: number; readonly stop: boolean };
}

/** Walks the source against the index. */
export async function surveySource(
  sourceDir: string,
  rules: ExcludeRules,
  index: SourceFileIndex,
  options: SurveyOptions = {},
): Promise<SourceSurvey> {
  const { onFile, others = {}, passedOver = {}, metadataLimit } = options;
  // An index of no version vouches for nothing; its lookups would all miss.
  const indexed = index.versionId !== null;
  const changed = indexed ? new Set<string>() : null;
  /** Notes a difference in `folder`, and so in every folder above it. */
  const changeIn = (folder: string | null): void => {
    for (let at = folder; at !== null && changed && !changed.has(at); at = folderOf(at))
      changed.add(at);
  };
  if (!indexed || !sameEntry(sourceRootEntry(sourceDir), index.lookup(''))) changeIn('');
  /** The folders the walk is in, the deepest last, and how many entries it found in each. */
  const open: Array<{ readonly path: string; found: number }> = [{ path: '', found: 0 }];
  /** Closes the folders the walk has left: one that lost an entry differs too. */
  const closeFoldersDownTo = (parent: string | null): void => {
    for (let folder = open.at(-1); folder && folder.path !== parent; folder = open.at(-1)) {
      open.pop();
      if (indexed && folder.found !== index.entriesIn(folder.path)) changeIn(folder.path);
    }
  };
  const floor = new MetadataFloor(metadataLimit?.bytes);
  let seen = 1;
  let files = 0;
  let bytes = 0;
  let filesToRead = 0;
  let bytesToRead = 0;
  for await (const entry of walkSource(sourceDir, {
    rules,
    ahead: index.entryCount >= WALK_AHEAD_FROM_ENTRIES,
    // Whatever could not be looked at may be anything; its own path is noted too, for a folder
    // that could not be listed.
    onSkip: (item) => {
      changeIn(item.path === '.' ? '' : item.path);
      passedOver.onSkip?.(item);
    },
    ...(passedOver.onExcluded ? { onExcluded: passedOver.onExcluded } : {}),
  })) {
    floor.add(entry);
    if (floor.over && metadataLimit?.stop === true) break;
    const parent = folderOf(entry.path);
    closeFoldersDownTo(parent);
    const folder = open.at(-1);
    if (folder) folder.found += 1;
    const known = indexed ? index.lookup(entry.path) : undefined;
    if (indexed && !sameEntry(entry, known))
      changeIn(entry.kind === 'directory' ? entry.path : parent);
    if (entry.kind === 'directory') open.push({ path: entry.path, found: 0 });
    seen += 1;
    if (entry.kind !== 'file') continue;
    files += 1;
    bytes += entry.size;
    onFile?.(entry.size);
    if (
      !(indexed && vouchingEntry(index, entry, known)) &&
      vouchedElsewhere(others, entry) === undefined
    ) {
      filesToRead += 1;
      bytesToRead += entry.size;
    }
  }
  closeFoldersDownTo(null);
  const unchanged = changed !== null && changed.size === 0 && seen === index.entryCount;
  return {
    unchanged,
    files,
    bytes,
    filesToRead,
    bytesToRead,
    changedFolders: changed,
    metadataFloorBytes: floor.finish(),
  };
}
