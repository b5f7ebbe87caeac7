import path from 'node:path';
import { EngineError } from '../api/index.ts';
import { sourcePlace } from '../protocol/index.ts';
import { versionPathParts } from './version-path.ts';

// Where a version's files came from, for a restore that names no folder: the folder backed up,
// as the manifest's `source_label` records it (`host:/absolute/folder`, §17.3), and below it the
// folder that held the wanted path. A version from another machine has no such place here.
//
// The folder backed up must be there. One on an external disk not connected now would be made
// anew in the disk's empty mount point, on the system disk, and would keep the disk from
// mounting there; a folder deleted whole is restored by naming it (--to).

/**
 * The folder to restore `subPath` of a version into so that it lands where it was backed up
 * from: the source folder for the whole version, else the folder that held the path.
 */
export function originalPlace(
  sourceLabel: unknown,
  subPath: string | undefined,
  host: { readonly hostname: string; readonly isFolder: (dir: string) => boolean },
): string {
  const source = sourcePlace(sourceLabel);
  if (!source) {
    throw new EngineError(
      'usage',
      'this version does not say which folder it was backed up from; name a folder to restore into (--to DIR)',
    );
  }
  if (source.host !== host.hostname) {
    throw new EngineError(
      'usage',
      `this version was backed up from ${source.folder} on ${source.host}, not on this computer; name a folder to restore into (--to DIR)`,
    );
  }
  // Refuses one that leads above the version's top, which joined would lead out of the folder.
  const parts = versionPathParts(subPath, sourceLabel, host.hostname);
  if (!host.isFolder(source.folder)) {
    throw new EngineError(
      'not_found',
      `${source.folder}, where this version was backed up from, is not there: if it is on a disk, connect it; to restore it anyway, name it with --to ${source.folder}`,
    );
  }
  return path.join(source.folder, ...parts.slice(0, -1));
}
