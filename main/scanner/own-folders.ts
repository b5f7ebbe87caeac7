import { realpathSync } from 'node:fs';
import path from 'node:path';
import type { ExcludeRules } from './exclude-rules.ts';

// Canopy never backs up its own folders: its home (state, staging, the metadata cache) and the
// embedded service's data. A backup of a home folder that holds them would otherwise read its
// own state while writing it, and send each earlier backup's packs again inside the next one.

/** The folders among `folders` that lie inside `sourceDir`, relative to it, '/'-separated. */
function foldersInside(sourceDir: string, folders: readonly string[]): Set<string> {
  const root = realpathSync(sourceDir);
  const inside = new Set<string>();
  for (const folder of folders) {
    let real: string;
    try {
      real = realpathSync(folder);
    } catch (error) {
      // A folder that does not exist holds nothing to leave out.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw error;
    }
    const relative = path.relative(root, real);
    // Outside the source, or the source itself, which the user chose to back up on purpose.
    if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) continue;
    inside.add(relative.split(path.sep).join('/'));
  }
  return inside;
}

/** `rules`, also excluding whichever of `folders` lie inside `sourceDir`. */
export function excludingFolders(
  rules: ExcludeRules,
  sourceDir: string,
  folders: readonly string[],
): ExcludeRules {
  const inside = foldersInside(sourceDir, folders);
  if (inside.size === 0) return rules;
  return {
    excludes: (relativePath, isDirectory) =>
      (isDirectory && inside.has(relativePath)) || rules.excludes(relativePath, isDirectory),
    excludedBy: (relativePath, isDirectory) =>
      isDirectory && inside.has(relativePath)
        ? { from: 'canopy' }
        : rules.excludedBy(relativePath, isDirectory),
  };
}
