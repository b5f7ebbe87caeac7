import { lstatSync, readdirSync } from 'node:fs';
import path from 'node:path';

/**
 * Each regular file's access time under `dir`, by its path there. Nothing is read or mapped
 * (fincore's mmap would set them): only the folders are listed and each name lstat'd.
 */
export function accessTimesOf(dir: string, below = ''): Map<string, number> {
  const times = new Map<string, number>();
  for (const entry of readdirSync(path.join(dir, below), { withFileTypes: true })) {
    const rel = path.join(below, entry.name);
    if (entry.isDirectory()) for (const pair of accessTimesOf(dir, rel)) times.set(...pair);
    else if (entry.isFile()) times.set(rel, lstatSync(path.join(dir, rel)).atimeMs);
  }
  return times;
}
