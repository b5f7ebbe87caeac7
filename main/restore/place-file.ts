import { linkSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
import { lstatUnlessRefused } from './refused-entry.ts';
import { REPLACING_REFUSED } from './replaceable.ts';
import { systemErrorCode } from '../api/index.ts';

// A restored file, written whole under a temporary name, put under its own name without
// replacing anything that took that name since the restore looked (a file the user saved
// there while the restore fetched this one, or a second restore into the same folder): a
// rename would replace it, and with it the user's work. A hard link to the new name fails
// instead when something has the name, and the restored file then goes beside it under a free
// one, as it would have had the name been taken from the start. A symlink is made in place,
// and making one fails on a name taken all the same. With --overwrite, what the system will not
// let be replaced (replaceable.ts) stays, and the restored file or link goes beside it.

/** Where a restore puts a file it wrote: whether it may replace what is there, and where else. */
export interface FilePlacing {
  /** Whether the file replaces what has its name (`--overwrite`). */
  readonly replace: boolean;
  /** A free name beside `target`, for a file whose name was taken meanwhile. */
  readonly nameBeside: (target: string) => string;
  /** Takes what has `target`, kept though `replace` (the file goes beside it), and why. */
  readonly notReplaced: (target: string, reason: string) => void;
}

/** Link failures of a disk that holds no hard links (FAT and exFAT, some FUSE file systems). */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EMLINK']);

/**
 * Puts the written file `temporary` under `target`, or, unless it may replace, under a free
 * name beside it when something has that name now. Gives the name it is under; the system's
 * error when no name can be made.
 */
export function placeFile(temporary: string, target: string, placing: FilePlacing): string {
  if (!placing.replace) return placeFrom(target, temporary, target, placing);
  try {
    renameSync(temporary, target);
    return target;
  } catch (error) {
    if (!isReplacingRefused(error, target)) throw error;
  }
  placing.notReplaced(target, REPLACING_REFUSED);
  return placeFrom(placing.nameBeside(target), temporary, target, placing);
}

/** Whether replacing what has `target` failed with `error` because the system refuses it. */
function isReplacingRefused(error: unknown, target: string): boolean {
  return systemErrorCode(error) === 'EPERM' && lstatUnlessRefused(target) !== undefined;
}

/** placeFile without replacing: under `first`, or the next free name beside `target`. */
function placeFrom(first: string, temporary: string, target: string, placing: FilePlacing): string {
  for (let name = first; ; name = placing.nameBeside(target)) {
    try {
      linkSync(temporary, name);
    } catch (error) {
      if (systemErrorCode(error) === 'EEXIST') continue;
      if (!NO_HARD_LINKS.has(systemErrorCode(error) ?? '')) throw error;
      // No hard links here: a rename, once nothing has the name, leaves a moment in which
      // something made under it would be replaced.
      if (lstatUnlessRefused(name) !== undefined) continue;
      renameSync(temporary, name);
      return name;
    }
    unlinkSync(temporary);
    return name;
  }
}

/**
 * Makes a symlink to `linkTarget` at `name`, or, unless it may replace, at a free name beside it
 * when something has that name now. Gives the name it is at; the system's error when none can
 * be made.
 */
export function placeSymlink(linkTarget: string, name: string, placing: FilePlacing): string {
  let replacing = placing.replace;
  let first = name;
  if (replacing) {
    try {
      unlinkSync(name);
    } catch (error) {
      if (isReplacingRefused(error, name)) {
        placing.notReplaced(name, REPLACING_REFUSED);
        replacing = false;
        first = placing.nameBeside(name);
      } else if (systemErrorCode(error) !== 'ENOENT') throw error;
    }
  }
  for (let at = first; ; at = placing.nameBeside(name)) {
    try {
      symlinkSync(linkTarget, at);
      return at;
    } catch (error) {
      if (replacing || systemErrorCode(error) !== 'EEXIST') throw error;
    }
  }
}
