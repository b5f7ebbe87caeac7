import { readdirSync } from 'node:fs';
import { EngineError } from '../api/index.ts';

// A source folder that is empty now, though its last backup here held files, is most often a
// disk's mount point while the disk is not mounted (an automounter leaves the folder behind),
// or a folder whose contents were moved away by mistake. Backed up as it is, it would make an
// empty version the active one: nothing is lost (the earlier versions stay), but a restore of
// the active version would bring back nothing. Such a backup needs to be asked for.

/**
 * Refuses to back up `sourceDir` when it holds nothing while its file index (`indexedEntries`,
 * the folder itself included) says its last backup held more.
 */
export function refuseEmptiedSource(sourceDir: string, indexedEntries: number): void {
  if (indexedEntries <= 1) return;
  if (readdirSync(sourceDir).length > 0) return;
  const held = indexedEntries - 1;
  throw new EngineError(
    'conflict',
    `${sourceDir} is empty, but its last backup held ${held} ${held === 1 ? 'file or folder' : 'files and folders'}: if it is on a disk, connect it; to back up the empty folder anyway, add --allow-empty`,
  );
}
