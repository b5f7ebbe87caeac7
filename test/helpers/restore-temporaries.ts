import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

// The files a restore writes under temporary names until they are whole, found where a test
// looks for what a stopped restore left.

/**
 * Files (and links put in their place) below `dir` under a restore's temporary names, by their
 * paths; none if it is not there.
 */
export function restoreTemporariesIn(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => !entry.isDirectory() && entry.name.startsWith('.canopy-restore-'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}
