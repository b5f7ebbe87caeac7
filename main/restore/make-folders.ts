import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { systemErrorCode } from '../api/index.ts';

// A folder and the folders above it, made as `mkdir -p` does. Node 20's own recursive mkdir
// is not used: on a read-only disk it reports ENOENT instead of EROFS, and under /proc it never
// returns, retrying a parent that exists.

/**
 * The mode a restored folder is made with, before it is given its own once all in it is
 * restored: never more open to others than that (a private folder's names are never listable
 * meanwhile), and always open to its owner, who writes into it.
 */
export function modeWhileFilled(mode: number | undefined): number | undefined {
  return mode === undefined ? undefined : (mode & 0o777) | 0o700;
}

/**
 * Makes `dir`, passing it to `onMade`; true once it is there, false when a folder above it is
 * missing.
 */
async function makeOne(
  dir: string,
  mode: number | undefined,
  onMade: ((dir: string) => void) | undefined,
): Promise<boolean> {
  try {
    await mkdir(dir, mode === undefined ? undefined : { mode });
    onMade?.(dir);
    return true;
  } catch (error) {
    if (systemErrorCode(error) === 'ENOENT') return false;
    // Something has the name already: fine if it is a folder (or a link to one).
    if (systemErrorCode(error) === 'EEXIST' && (await stat(dir)).isDirectory()) return true;
    throw error;
  }
}

/**
 * Makes `dir` (with `mode`, less the umask, when given) and any missing folder above it (as new
 * folders); the system's error when one cannot be made. `onMade` takes each folder it made,
 * parents first.
 */
export async function makeFolders(
  dir: string,
  mode?: number,
  onMade?: (dir: string) => void,
): Promise<void> {
  if (await makeOne(dir, mode, onMade)) return;
  const parent = path.dirname(dir);
  if (parent !== dir) await makeFolders(parent, undefined, onMade);
  if (!(await makeOne(dir, mode, onMade))) {
    // The parent is there now, yet the folder still cannot be made (a pseudo file system).
    await mkdir(dir, mode === undefined ? undefined : { mode });
    onMade?.(dir);
  }
}
