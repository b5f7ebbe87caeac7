import os from 'node:os';
import path from 'node:path';
import { EngineError } from '../api/index.ts';
import { pathInsideByLinks } from '../scanner/index.ts';

// A path in a version, as a user gives it to `canopy ls` and `canopy restore`: relative to the
// folder backed up (`2019/beach.jpg`, `./2019/`), or as the absolute path it had there
// (`~/Pictures/2019/beach.jpg`, which the shell hands over as /home/ann/Pictures/2019/...), so
// that a path copied from a file manager or completed by the shell names what it names on disk.

/** The host and folder a source label (`host:/absolute/folder`, §17.3) names. */
export interface SourcePlace {
  readonly host: string;
  readonly folder: string;
}

/** Where a version was backed up from; undefined for a label this client did not write. */
export function sourcePlace(label: unknown): SourcePlace | undefined {
  if (typeof label !== 'string') return undefined;
  // A host name holds no colon; the folder after it may.
  const colon = label.indexOf(':');
  if (colon <= 0) return undefined;
  const folder = label.slice(colon + 1);
  if (!path.isAbsolute(folder)) return undefined;
  return { host: label.slice(0, colon), folder };
}

/**
 * The names, from the version's top down, that `given` means in a version backed up from the
 * folder `sourceLabel` names; [] for the whole version. An absolute path inside that folder is
 * taken from it; any other is taken from the version's top (`/2019` is `2019`). `.` and `..`
 * are resolved as the names are read, as a shell would; none leads above the top.
 */
export function versionPathParts(given: string | undefined, sourceLabel: unknown): string[] {
  if (given === undefined) return [];
  const source = sourcePlace(sourceLabel);
  let fromTop = given;
  if (source !== undefined && path.isAbsolute(given)) {
    let inside: string | undefined = path.relative(source.folder, given);
    if (inside === '..' || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside))
      // The folder by another path, on the computer it was backed up from (same-folder.ts).
      inside = source.host === os.hostname() ? pathInsideByLinks(given, source.folder) : undefined;
    if (inside !== undefined) fromTop = inside.split(path.sep).join('/');
  }
  const parts: string[] = [];
  for (const name of fromTop.split('/')) {
    if (name === '' || name === '.') continue;
    if (name !== '..') parts.push(name);
    else if (parts.pop() === undefined)
      throw new EngineError(
        'not_found',
        `${given} leads above the top of this version (canopy ls shows what it holds)`,
      );
  }
  return parts;
}
