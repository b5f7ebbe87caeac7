import path from 'node:path';
import { EngineError } from '../api/index.ts';
import { sourcePlace } from '../protocol/index.ts';
import { pathInsideByLinks } from '../scanner/index.ts';

// A path in a version, as a user gives it to `canopy ls` and `canopy restore`: relative to the
// folder backed up (`2019/beach.jpg`, `./2019/`), or as the absolute path it had there
// (`~/Pictures/2019/beach.jpg`, which the shell hands over as /home/ann/Pictures/2019/...), so
// that a path copied from a file manager or completed by the shell names what it names on disk.

/**
 * The names, from the version's top down, that `given` means in a version backed up from the
 * folder `sourceLabel` names; [] for the whole version. An absolute path inside that folder is
 * taken from it; any other is taken from the version's top (`/2019` is `2019`). `.` and `..`
 * are resolved as the names are read, as a shell would; none leads above the top.
 */
export function versionPathParts(
  given: string | undefined,
  sourceLabel: unknown,
  /** This computer's name in source labels (computer-name.ts); undefined: links not followed. */
  computer?: string,
): string[] {
  if (given === undefined) return [];
  const fromTop = pathInSource(given, sourceLabel, computer) ?? given;
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

/**
 * The absolute path `given` as a path from the top of a version backed up from the folder
 * `sourceLabel` names (`2019/beach.jpg`), when it lies in that folder, by its path or, on the
 * computer it was backed up from, another (same-folder.ts); undefined for a relative path, or
 * one that lies elsewhere.
 */
export function pathInSource(
  given: string,
  sourceLabel: unknown,
  /** This computer's name in source labels (computer-name.ts); undefined: links not followed. */
  computer: string | undefined,
): string | undefined {
  const source = sourcePlace(sourceLabel);
  if (source === undefined || !path.isAbsolute(given)) return undefined;
  let inside: string | undefined = path.relative(source.folder, given);
  if (inside === '..' || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside))
    // The folder by another path, on the computer it was backed up from (same-folder.ts).
    inside = source.host === computer ? pathInsideByLinks(given, source.folder) : undefined;
  return inside?.split(path.sep).join('/');
}
