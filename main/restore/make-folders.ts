import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';

// A folder and the folders above it, made as `mkdir -p` does. Node 20's own recursive mkdir
// is not used: on a read-only disk it reports ENOENT instead of EROFS, and under /proc it never
// returns, retrying a parent that exists.

function codeOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Makes `dir`; true once it is there, false when a folder above it is missing. */
async function makeOne(dir: string): Promise<boolean> {
  try {
    await mkdir(dir);
    return true;
  } catch (error) {
    if (codeOf(error) === 'ENOENT') return false;
    // Something has the name already: fine if it is a folder (or a link to one).
    if (codeOf(error) === 'EEXIST' && (await stat(dir)).isDirectory()) return true;
    throw error;
  }
}

/** Makes `dir` and any missing folder above it; the system's error when one cannot be made. */
export async function makeFolders(dir: string): Promise<void> {
  if (await makeOne(dir)) return;
  const parent = path.dirname(dir);
  if (parent !== dir) await makeFolders(parent);
  if (!(await makeOne(dir))) {
    // The parent is there now, yet the folder still cannot be made (a pseudo file system).
    await mkdir(dir);
  }
}
