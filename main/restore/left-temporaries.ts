import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { isDiskGone } from '../api/index.ts';

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
  /**
   * Whether some may be left: the folder is not there (a disk not mounted now), or a folder
   * could not be read or a temporary removed (permissions changed since, a read-only disk).
   */
  readonly someLeft: boolean;
}

/**
 * Whether a failed read or removal is the disk's or its permissions', rather than a bug: a disk
 * pulled out (isDiskGone) answers as a folder that cannot be read.
 */
export function isOutOfReach(error: unknown): boolean {
  const { code } = error as NodeJS.ErrnoException;
  return code === 'EACCES' || code === 'EPERM' || code === 'EROFS' || isDiskGone(error);
}

/**
 * Removes the files under `token`'s temporary names anywhere in `target`, but those in `keep`
 * (absolute paths): part-written files kept for a restore to go on with (part-files.ts).
 */
export function removeLeftTemporaries(
  target: string,
  token: string,
  keep: ReadonlySet<string> = new Set(),
): LeftTemporaries {
  const prefix = temporaryPrefix(token);
  let removed = 0;
  let someLeft = false;
  const folders = [target];
  for (let folder = folders.pop(); folder !== undefined; folder = folders.pop()) {
    let entries;
    try {
      entries = readdirSync(folder, { withFileTypes: true });
    } catch (error) {
      const { code } = error as NodeJS.ErrnoException;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        // A folder below the target gone since (moved or deleted): nothing of ours is there.
        // The target itself may be on a disk not mounted now.
        if (folder === target) someLeft = true;
        continue;
      }
      if (!isOutOfReach(error)) throw error;
      someLeft = true;
      continue;
    }
    for (const entry of entries) {
      const file = path.join(folder, entry.name);
      if (entry.isDirectory()) folders.push(file);
      else if (entry.isFile() && entry.name.startsWith(prefix) && !keep.has(file)) {
        try {
          rmSync(file, { force: true });
          removed += 1;
        } catch (error) {
          if (!isOutOfReach(error)) throw error;
          someLeft = true;
        }
      }
    }
  }
  return { removed, someLeft };
}
