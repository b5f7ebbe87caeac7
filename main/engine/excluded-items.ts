import path from 'node:path';
import { walkSource, type EntryStats, type ExcludedBy } from '../scanner/index.ts';

// What a backup's rules leave out, as a dry run tells it: each excluded item with what it holds
// and the rule that excludes it, so that a user sees the gigabytes a rule keeps out (or that a
// rule meant for a cache also takes their documents) before the backup runs.

/** One item a backup's rules leave out: the topmost, as nothing under it is looked at. */
export interface ExcludedItem {
  /** Its path in the folder backed up, '/'-separated. */
  readonly path: string;
  readonly type: EntryStats['type'];
  /** The regular files it is or holds, and their bytes. */
  readonly files: number;
  readonly bytes: number;
  /** In a folder, the items that could not be looked at, which the figures leave out. */
  readonly unreadable: number;
  readonly by: ExcludedBy;
}

/** An item found excluded by a walk of the source, before it is measured. */
export interface FoundExcluded {
  readonly path: string;
  readonly stats: EntryStats;
  readonly by: ExcludedBy;
}

/** `found` with what it holds: a folder is walked (symlinks not followed), a file is its size. */
export async function measureExcluded(
  sourceDir: string,
  found: FoundExcluded,
): Promise<ExcludedItem> {
  const { path: relative, stats, by } = found;
  if (stats.type !== 'directory') {
    const file = stats.type === 'file';
    return {
      path: relative,
      type: stats.type,
      files: file ? 1 : 0,
      bytes: file ? stats.size : 0,
      unreadable: 0,
      by,
    };
  }
  let files = 0;
  let bytes = 0;
  let unreadable = 0;
  // On this thread: a worker listing ahead costs tens of milliseconds to start, and a source
  // may hold hundreds of small excluded folders (a cache in each project).
  const walk = walkSource(path.join(sourceDir, relative), {
    onSkip: (item) => {
      if (item.kind === 'unreadable') unreadable += 1;
    },
  });
  for await (const entry of walk) {
    if (entry.kind !== 'file') continue;
    files += 1;
    bytes += entry.size;
  }
  return { path: relative, type: 'directory', files, bytes, unreadable, by };
}
