import { constants, lstatSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { compareUtf8 } from '../protocol/index.ts';

// How the walk (walk-source.ts) lists a folder and looks at its entries: on its own thread, as
// it reaches each (readFoldersHere), or from a worker thread ahead of it (stat-ahead-reader.ts).

/** What the walk needs of an entry's lstat. */
export interface EntryStats {
  readonly type: 'directory' | 'file' | 'symlink' | 'socket' | 'fifo' | 'device';
  /** The permission bits, with setuid, setgid and sticky. */
  readonly permissions: number;
  readonly size: number;
  readonly mtimeNs: bigint;
  /**
   * When its inode last changed: its content, mode, links or times. No program can set it back
   * (main/uploader/unchanged-source.ts).
   */
  readonly ctimeNs: bigint;
  readonly ino: bigint;
  readonly dev: bigint;
}

/** An entry's lstat from its fields: `mode` as lstat gives it, type bits and all. */
export function entryStatsOf(
  mode: number,
  size: number,
  mtimeNs: bigint,
  ctimeNs: bigint,
  ino: bigint,
  dev: bigint,
): EntryStats {
  return { type: typeOfMode(mode), permissions: mode & 0o7777, size, mtimeNs, ctimeNs, ino, dev };
}

function typeOfMode(mode: number): EntryStats['type'] {
  switch (mode & constants.S_IFMT) {
    case constants.S_IFDIR:
      return 'directory';
    case constants.S_IFREG:
      return 'file';
    case constants.S_IFLNK:
      return 'symlink';
    case constants.S_IFSOCK:
      return 'socket';
    case constants.S_IFIFO:
      return 'fifo';
    default:
      return 'device';
  }
}

/** A folder's names in UTF-8 byte order, and a look at each (an lstat; it throws as lstat does). */
export interface ListedFolder {
  readonly names: readonly string[];
  stats(index: number): EntryStats;
}

/**
 * How a walk lists a folder: `list` gives the folder's names, or throws as readdir does. The
 * walk tells `passOver` of a folder it will not list (excluded by a rule), and calls `close`
 * once it is done.
 */
export interface FolderReader {
  list(absolute: string): ListedFolder | Promise<ListedFolder>;
  passOver?(absolute: string): void;
  close?(): Promise<void>;
}

/** Lists and looks on the walk's own thread, as the walk reaches each folder and entry. */
export const readFoldersHere: FolderReader = {
  list(absolute) {
    const names = readdirSync(absolute).sort(compareUtf8);
    return {
      names,
      stats: (index) => {
        const found = lstatSync(path.join(absolute, names[index] ?? ''), { bigint: true });
        return entryStatsOf(
          Number(found.mode),
          Number(found.size),
          found.mtimeNs,
          found.ctimeNs,
          found.ino,
          found.dev,
        );
      },
    };
  },
};
