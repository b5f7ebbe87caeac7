import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * `dir` when it is there, else the nearest folder above it that is: where a restore into `dir`
 * makes it, and so the folder whose disk and permissions decide whether it can.
 */
export function nearestFolderThere(dir: string): string {
  let folder = dir;
  while (!existsSync(folder) && path.dirname(folder) !== folder) folder = path.dirname(folder);
  return folder;
}
