import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';

// The metadata cache keeps each version's metadata CAR that this device made or read, for
// browsing offline and for the next backup's previous tree. A CAR holds every node of its tree,
// about 160 bytes a file: a backup of 400 000 files added 63 MB to the cache every time, and
// nothing ever removed one (15 backups: 903 MB). So the cache has a budget. Past it, the CARs
// used longest ago go first, but never those the caller keeps (each bucket's active version,
// which the next backup builds on, and the one just cached). A version no longer cached is
// pulled again when asked for, and can then not be browsed offline.
//
// "Used" is the file's mtime: set when the CAR is written, and again each time the engine reads
// it from the cache. Access times are no help, as most systems update them lazily.

/** What the cache may hold, unless the kept versions alone are more. */
export const METADATA_CACHE_BUDGET_BYTES = 2 * 1024 ** 3;

const CACHED_CAR = /^(.+)\.car$/;

/**
 * Removes cached CARs of `dir`, least recently used first, until what is left fits
 * `budgetBytes`; versions in `keep` stay whatever their size.
 */
export async function trimMetadataCache(
  dir: string,
  keep: ReadonlySet<string>,
  budgetBytes: number,
): Promise<void> {
  const cached: Array<{ file: string; bytes: number; usedMs: number; kept: boolean }> = [];
  for (const name of await readdir(dir)) {
    const versionId = CACHED_CAR.exec(name)?.[1];
    if (versionId === undefined) continue;
    const file = path.join(dir, name);
    let stats;
    try {
      stats = await stat(file);
    } catch (error) {
      // Gone meanwhile: another command of this device trimmed it first.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw error;
    }
    cached.push({ file, bytes: stats.size, usedMs: stats.mtimeMs, kept: keep.has(versionId) });
  }
  let total = cached.reduce((sum, car) => sum + car.bytes, 0);
  for (const car of cached.sort((a, b) => a.usedMs - b.usedMs)) {
    if (total <= budgetBytes) return;
    if (car.kept) continue;
    await rm(car.file, { force: true });
    total -= car.bytes;
  }
}
