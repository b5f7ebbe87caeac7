import { readlinkSync } from 'node:fs';
import path from 'node:path';
import { setImmediate } from 'node:timers/promises';
import { isDiskGone } from '../api/index.ts';
import type { ExcludeRules } from './exclude-rules.ts';
import { InodeNumbers } from './inode-numbers.ts';
import { kernelFileSystemAt } from './kernel-file-systems.ts';
import { skipKindOf, type SkippedItem } from './skipped-item.ts';
import {
  readFoldersHere,
  type EntryStats,
  type FolderReader,
  type ListedFolder,
} from './folder-reader.ts';
import { StatAheadReader } from './stat-ahead-reader.ts';
import { sourceFolderStats } from './source-folder.ts';

// Walks a source folder in a stable order (names sorted by their UTF-8 bytes) and reports what
// it finds. Symlinks are reported as symlinks and never followed, so loops cannot happen.
// Sockets, FIFOs and devices are skipped with a reason, and so is anything that cannot be
// listed or stat'ed: one bad item never stops the walk. So are the kernel's own file systems
// where they are mounted in the source (kernel-file-systems.ts).
//
// The file-system calls are synchronous on purpose: a cached lstat costs a few microseconds,
// against about 50 through the thread pool, and a rescan of 100 000 unchanged files is mostly
// lstat. The walk yields to the event loop every few hundred entries so nothing waits long.

/** `ino` is 0 on a file system that makes inode numbers up (inode-numbers.ts). */
export type SourceEntry =
  | {
      readonly kind: 'directory';
      readonly path: string;
      readonly mode: number;
      readonly mtimeNs: bigint;
      readonly ctimeNs: bigint;
      readonly ino: bigint;
    }
  | {
      readonly kind: 'file';
      readonly path: string;
      readonly mode: number;
      readonly mtimeNs: bigint;
      readonly ctimeNs: bigint;
      readonly size: number;
      readonly ino: bigint;
    }
  | {
      readonly kind: 'symlink';
      readonly path: string;
      readonly mode: number;
      readonly mtimeNs: bigint;
      readonly ctimeNs: bigint;
      readonly ino: bigint;
      readonly target: string;
    };

/**
 * Names and link targets are bytes to Linux but text to UnixFS, and Node reads a name that is
 * not UTF-8 with U+FFFD in place of the bad bytes: that name then finds nothing, and a link's
 * target would be stored mangled. Both are skipped with this reason instead.
 */
const NOT_UTF8 = 'not valid UTF-8, which a backup cannot store';
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** An entry the walk listed that cannot be looked at. */
function lookupFailure(rel: string, name: string, error: unknown): SkippedItem {
  const code = (error as NodeJS.ErrnoException).code;
  // A name holding U+FFFD that is not there was read from bytes that are not UTF-8.
  if (code === 'ENOENT' && name.includes('\uFFFD'))
    return {
      path: rel,
      reason: `its name is ${NOT_UTF8}; rename it to back it up`,
      kind: 'unreadable',
    };
  return { path: rel, reason: reasonOf(error), kind: skipKindOf(error) };
}

/** Bytes as UTF-8 text, or undefined when they are not UTF-8. */
function strictText(bytes: Buffer): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    // The decoder's only failure here: bytes that are not UTF-8.
    return undefined;
  }
}

function reasonOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOENT':
      return 'deleted while scanning';
    // A name the folder listed is never too long by itself: the whole path is.
    case 'ENAMETOOLONG':
      return 'its path is longer than the system lets a program open (4 096 bytes on Linux); move it to a folder nearer the top to back it up';
    default:
      return error instanceof Error ? error.message : String(error);
  }
}

export interface WalkOptions {
  readonly onSkip: (item: SkippedItem) => void;
  /**
   * Lists folders and looks at their entries on a worker thread, ahead of the walk, so that
   * the caller's own work on each entry runs beside those calls (stat-ahead-reader.ts). For a
   * walk of every folder (no `enters`) of many entries: the worker costs tens of milliseconds
   * to start.
   */
  readonly ahead?: boolean;
  /** Paths excluded by rules are reported here, not as skipped items. */
  readonly onExcluded?: (relativePath: string, stats: EntryStats) => void;
  readonly rules?: ExcludeRules;
  /**
   * Whether to walk into a folder the walk found; by default every one. A folder not entered
   * is still reported, and nothing under it is looked at.
   */
  readonly enters?: (folder: Extract<SourceEntry, { kind: 'directory' }>) => boolean;
}

const ENTRIES_BETWEEN_YIELDS = 256;

/** The source folder itself, as an entry with the empty path. */
export function sourceRootEntry(root: string): Extract<SourceEntry, { kind: 'directory' }> {
  // stat, not lstat: a source given as a symlink is the folder it points to, and that folder's
  // mode is what a restore gives back. The link's own (rwxrwxrwx) would make it world-writable.
  // Checked as the backup began; maybe gone since (a second read of a tree changed while read).
  const stats = sourceFolderStats(root);
  return {
    kind: 'directory',
    path: '',
    mode: Number(stats.mode & 0o7777n),
    mtimeNs: stats.mtimeNs,
    ctimeNs: stats.ctimeNs,
    ino: new InodeNumbers().of(stats, root),
  };
}

/** A folder being walked: its names in order, and the next one to look at. */
interface OpenFolder {
  readonly relative: string;
  readonly absolute: string;
  readonly listed: ListedFolder;
  /** The device it lies on: a folder inside on another is a mount point. */
  readonly dev: bigint;
  next: number;
}

/**
 * Rethrows a disk that is gone (pulled out during the walk): every entry after would be
 * reported unreadable one by one, and the version made of what is left would be no backup.
 */
function throwIfDiskGone(error: unknown): void {
  if (isDiskGone(error)) throw error;
}

/**
 * The name of the kernel file system mounted at `full`; undefined for one holding files; null
 * when it cannot be looked at (reported as `rel`, skipped: nothing under it could be read).
 */
function kernelOrSkipped(
  full: string,
  rel: string,
  onSkip: (item: SkippedItem) => void,
): string | undefined | null {
  try {
    return kernelFileSystemAt(full);
  } catch (error) {
    throwIfDiskGone(error);
    onSkip({ path: rel, reason: `cannot look at: ${reasonOf(error)}`, kind: skipKindOf(error) });
    return null;
  }
}

/** Whether `folder` lies in a kernel file system; not when it cannot be looked at. */
function isKernelFolder(folder: string): boolean {
  try {
    return kernelFileSystemAt(folder) !== undefined;
  } catch {
    // Listing it tells why it cannot be looked at, as for any folder.
    return false;
  }
}

/** A folder listed, or undefined (reported) when it cannot be listed. */
async function listFolder(
  reader: FolderReader,
  root: string,
  relative: string,
  options: WalkOptions,
): Promise<ListedFolder | undefined> {
  try {
    return await reader.list(path.join(root, relative));
  } catch (error) {
    throwIfDiskGone(error);
    options.onSkip({
      path: relative || '.',
      reason: `cannot list: ${reasonOf(error)}`,
      kind: skipKindOf(error),
    });
    return undefined;
  }
}

/**
 * Every entry under `root`, a folder right before what it holds. One generator with a stack of
 * open folders: a generator per folder, each delegating to the next, cost every entry a step
 * through each level above it.
 */
export async function* walkSource(root: string, options: WalkOptions): AsyncGenerator<SourceEntry> {
  const reader =
    options.ahead === true && options.enters === undefined
      ? new StatAheadReader(root)
      : readFoldersHere;
  try {
    yield* walkWith(reader, root, options);
  } finally {
    await reader.close?.();
  }
}

async function* walkWith(
  reader: FolderReader,
  root: string,
  options: WalkOptions,
): AsyncGenerator<SourceEntry> {
  const { onSkip } = options;
  // A kernel file system holds nothing to walk (a folder excluded by a rule is walked so, to be
  // measured: `proc/` excluded from a backup of `/` would count /proc/kcore's terabytes).
  if (isKernelFolder(root)) return;
  const top = await listFolder(reader, root, '', options);
  if (!top) return;
  const open: OpenFolder[] = [
    {
      relative: '',
      absolute: root,
      listed: top,
      dev: sourceFolderStats(root).dev,
      next: 0,
    },
  ];
  const inodes = new InodeNumbers();
  let sinceYield = 0;
  while (open.length > 0) {
    const folder = open[open.length - 1] as OpenFolder;
    const index = folder.next;
    const name = folder.listed.names[index];
    if (name === undefined) {
      open.pop();
      continue;
    }
    folder.next += 1;
    const rel = folder.relative === '' ? name : `${folder.relative}/${name}`;
    const full = path.join(root, rel);
    sinceYield += 1;
    if (sinceYield >= ENTRIES_BETWEEN_YIELDS) {
      sinceYield = 0;
      await setImmediate();
    }
    let stats;
    try {
      stats = folder.listed.stats(index);
    } catch (error) {
      throwIfDiskGone(error);
      onSkip(lookupFailure(rel, name, error));
      continue;
    }
    const mode = stats.permissions;
    if (options.rules?.excludes(rel, stats.type === 'directory') === true) {
      if (stats.type === 'directory') reader.passOver?.(full);
      options.onExcluded?.(rel, stats);
      continue;
    }
    if (stats.type === 'directory') {
      // Looked at only where another file system is mounted: statfs costs a call per folder.
      const kernel = stats.dev === folder.dev ? undefined : kernelOrSkipped(full, rel, onSkip);
      if (kernel === null) {
        reader.passOver?.(full);
        continue;
      }
      const ino = inodes.of(stats, full);
      const found = {
        kind: 'directory',
        path: rel,
        mode,
        mtimeNs: stats.mtimeNs,
        ctimeNs: stats.ctimeNs,
        ino,
      } as const;
      // Asked before the folder is reported: a caller running ahead of its consumer decides
      // now, and the consumer may not see the entry until later. A kernel file system's mount
      // point is kept, as an empty folder (`tar --one-file-system` keeps it so), for a restore
      // of the whole disk to mount it on.
      const entering = kernel === undefined && (options.enters?.(found) ?? true);
      yield found;
      if (kernel !== undefined) {
        reader.passOver?.(full);
        onSkip({
          path: rel,
          reason: `the kernel's ${kernel} file system is mounted there, whose entries are not files: kept as an empty folder`,
          kind: 'special',
        });
      }
      if (!entering) continue;
      const listed = await listFolder(reader, root, rel, options);
      if (listed) open.push({ relative: rel, absolute: full, listed, dev: stats.dev, next: 0 });
    } else if (stats.type === 'file') {
      yield {
        kind: 'file',
        path: rel,
        mode,
        mtimeNs: stats.mtimeNs,
        ctimeNs: stats.ctimeNs,
        size: stats.size,
        ino: inodes.of(stats, folder.absolute),
      };
    } else if (stats.type === 'symlink') {
      let target: string | undefined;
      try {
        target = strictText(readlinkSync(full, { encoding: 'buffer' }));
      } catch (error) {
        throwIfDiskGone(error);
        onSkip({ path: rel, reason: reasonOf(error), kind: skipKindOf(error) });
        continue;
      }
      if (target === undefined)
        onSkip({
          path: rel,
          reason: `its target is ${NOT_UTF8}; link it again to back it up`,
          kind: 'unreadable',
        });
      else
        yield {
          kind: 'symlink',
          path: rel,
          mode,
          mtimeNs: stats.mtimeNs,
          ctimeNs: stats.ctimeNs,
          ino: inodes.of(stats, folder.absolute),
          target,
        };
    } else {
      onSkip({
        path: rel,
        reason:
          stats.type === 'socket'
            ? 'socket (not backed up)'
            : stats.type === 'fifo'
              ? 'named pipe (not backed up)'
              : 'device (not backed up)',
        kind: 'special',
      });
    }
  }
}
