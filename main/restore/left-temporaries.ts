import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';

// The temporary names a restore writes its files under, and the removal of those a restore
// killed part-way left behind. Its files are written beside their targets, anywhere below the
// folder it restored into, so that whole folder is looked through; links are not followed.

/** The start of every temporary name of the restore whose token is `token`. */
export function temporaryPrefix(token: string): string {
  return `.canopy-restore-${token}-`;
}

export interface LeftTemporaries {
  /** Temporaries removed. */
  readonly removed: number;
  /** Folders that could not be read (permissions changed since): what they hold is left. */
  readonly unread: number;
}

/** Removes the files under `token`'s temporary names anywhere in `target`. */
export function removeLeftTemporaries(target: string, token: string): LeftTemporaries {
  const prefix = temporaryPrefix(token);
  let removed = 0;
  let unread = 0;
  const folders = [target];
  for (let folder = folders.pop(); folder !== undefined; folder = folders.pop()) {
    let entries;
    try {
      entries = readdirSync(folder, { withFileTypes: true });
    } catch (error) {
      const { code } = error as NodeJS.ErrnoException;
      // Gone since (the user moved or deleted it): nothing of ours is left there.
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      if (code === 'EACCES' || code === 'EPERM') {
        unread += 1;
        continue;
      }
      throw error;
    }
    for (const entry of entries) {
      const file = path.join(folder, entry.name);
      if (entry.isDirectory()) folders.push(file);
      else if (entry.isFile() && entry.name.startsWith(prefix)) {
        rmSync(file, { force: true });
        removed += 1;
      }
    }
  }
  return { removed, unread };
}
