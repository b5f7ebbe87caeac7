import path from 'node:path';
import { EngineError } from '../api/index.ts';

// Where a version's files came from, for a restore that names no folder: the folder backed up,
// as the manifest's `source_label` records it (`host:/absolute/folder`, §17.3), and below it the
// folder that held the wanted path. A version from another machine has no such place here.
//
// The folder backed up must be there. One on an external disk not connected now would be made
// anew in the disk's empty mount point, on the system disk, and would keep the disk from
// mounting there; a folder deleted whole is restored by naming it (--to).

/** The host and folder a source label names; undefined for one this client did not write. */
function labelParts(label: unknown): { host: string; folder: string } | undefined {
  if (typeof label !== 'string') return undefined;
  // A host name holds no colon; the folder after it may.
  const colon = label.indexOf(':');
  if (colon <= 0) return undefined;
  const folder = label.slice(colon + 1);
  if (!path.isAbsolute(folder)) return undefined;
  return { host: label.slice(0, colon), folder };
}

/**
 * The folder to restore `subPath` of a version into so that it lands where it was backed up
 * from: the source folder for the whole version, else the folder that held the path.
 */
export function originalPlace(
  sourceLabel: unknown,
  subPath: string | undefined,
  host: { readonly hostname: string; readonly isFolder: (dir: string) => boolean },
): string {
  const source = labelParts(sourceLabel);
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
  const parts = (subPath ?? '').split('/').filter((part) => part !== '');
  // No version holds such a name (the restore refuses them), and joined, they would lead out.
  if (parts.some((part) => part === '.' || part === '..'))
    throw new EngineError(
      'not_found',
      `no ${subPath ?? ''} in this version (canopy ls shows what it holds)`,
    );
  if (!host.isFolder(source.folder)) {
    throw new EngineError(
      'not_found',
      `${source.folder}, where this version was backed up from, is not there: if it is on a disk, connect it; to restore it anyway, name it with --to ${source.folder}`,
    );
  }
  return path.join(source.folder, ...parts.slice(0, -1));
}
