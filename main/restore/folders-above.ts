import path from 'node:path';
import type { CID } from 'multiformats/cid';
import { lstatUnlessRefused } from './refused-entry.ts';
import { cidAt, entryOfNode, type NodeLookup } from './walk-tree.ts';

// One file or folder restored to where it was backed up from, after the folders above it were
// deleted too (`canopy restore ~/.gnupg/pubring.kbx` once ~/.gnupg is gone): those folders are
// made again as the version holds them, with their modes and times, not as new folders of the
// user's umask. A private folder (0700) comes back private.

/** A folder above the restored entry, made by the restore, as the version holds it. */
export interface FolderAbove {
  readonly dir: string;
  readonly mode: number | undefined;
  readonly mtime: bigint | undefined;
}

/**
 * The folders of the version above the entry at `wanted` (its path's parts below the version's
 * top) that are missing below the source folder, top first: a restore into `targetDir`, where
 * the entry's folder was backed up from, makes them. The source folder itself is there already
 * (original-place.ts refuses a restore to a source folder that is not).
 */
export function missingFoldersAbove(
  root: CID,
  nodes: NodeLookup,
  wanted: readonly string[],
  targetDir: string,
): FolderAbove[] {
  const above = wanted.slice(0, -1);
  const sourceDir = path.resolve(targetDir, ...above.map(() => '..'));
  const missing: FolderAbove[] = [];
  for (let depth = 1; depth <= above.length; depth++) {
    const dir = path.join(sourceDir, ...above.slice(0, depth));
    if (lstatUnlessRefused(dir) !== undefined) continue;
    const cid = cidAt(root, above.slice(0, depth), nodes);
    // Not in the version as a folder: the walk of the wanted path reports the tree as it is.
    if (cid === undefined) break;
    const entry = entryOfNode(cid, nodes);
    if (entry.kind !== 'directory') break;
    missing.push({ dir, mode: entry.mode, mtime: entry.mtimeNanoseconds });
  }
  return missing;
}
