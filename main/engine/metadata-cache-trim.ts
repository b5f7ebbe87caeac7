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

/**
 * A cached CAR, `<version>.car`, or the index of its nodes, `<version>.car.nodes` (`.partial`
 * while it is written, or if a crash cut that short).
 */
const CACHED_FILE = /^(.+)\.car(\.nodes(?:\.partial)?)?$/;

/**
 * Removes cached CARs of `dir` with their node indexes, least recently used first, until what
 * is left fits `budgetBytes`; versions in `keep` stay whatever their size. An index whose CAR
 * is gone goes too.
 */
export async function trimMetadataCache(
  dir: string,
  keep: ReadonlySet<string>,
  budgetBytes: number,
): Promise<void> {
  const cached = new Map<
    string,
    { files: string[]; bytes: number; usedMs: number | undefined; kept: boolean }
  >();
  for (const name of await readdir(dir)) {
    const match = CACHED_FILE.exec(name);
    const versionId = match?.[1];
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
    const version = cached.get(versionId) ?? {
      files: [],
      bytes: 0,
      usedMs: undefined,
      kept: keep.has(versionId),
    };
    version.files.push(file);
    version.bytes += stats.size;
    if (match?.[2] === undefined) version.usedMs = stats.mtimeMs;
    cached.set(versionId, version);
  }
  const versions = [...cached.values()];
  for (const orphan of versions.filter((version) => version.usedMs === undefined)) {
    for (const file of orphan.files) await rm(file, { force: true });
  }
  const whole = versions.filter((version) => version.usedMs !== undefined);
  let total = whole.reduce((sum, version) => sum + version.bytes, 0);
  for (const version of whole.sort((a, b) => (a.usedMs ?? 0) - (b.usedMs ?? 0))) {
    if (total <= budgetBytes) return;
    if (version.kept) continue;
    for (const file of version.files) await rm(file, { force: true });
    total -= version.bytes;
  }
}
