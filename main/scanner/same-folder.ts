import { realpathSync } from 'node:fs';
import path from 'node:path';

// One folder has many paths: through a symbolic link (a Documents linked to a data disk, a home
// under /home linked to /data/home), and `canopy backup .` is always given the path without the
// links, since a process's working folder is kept resolved. A bucket holds the versions of one
// folder (§17.3): backed up by one path and then by another, it is still the same folder, and
// is not refused as another source, nor read again whole under a second file index.

/** The path of `folder` without symbolic links; undefined when it cannot be resolved. */
function resolved(folder: string): string | undefined {
  try {
    return realpathSync(folder);
  } catch (error) {
    // Gone, on a disk not connected, or behind a folder this user may not enter: it cannot be
    // told the same as another, which is all this asks.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES' || code === 'ELOOP')
      return undefined;
    throw error;
  }
}

/** Whether the absolute paths `a` and `b` name the same folder on this computer now. */
export function isSameFolder(a: string, b: string): boolean {
  if (a === b) return true;
  const real = resolved(a);
  return real !== undefined && real === resolved(b);
}

/**
 * The path among `known` (the paths a bucket was backed up from here) that names the same
 * folder as `folder`: `folder` itself when it is one of them, or none does.
 */
export function knownPathOf(folder: string, known: readonly string[]): string {
  if (known.includes(folder)) return folder;
  const real = resolved(folder);
  if (real === undefined) return folder;
  return known.find((other) => resolved(other) === real) ?? folder;
}

/**
 * The absolute path `given` relative to `folder` when it lies in it by another path (through a
 * link on either side); undefined when it lies elsewhere, or `folder` cannot be resolved. The
 * end of `given` that is not there (a file deleted, to be restored) is taken as written.
 */
export function pathInsideByLinks(given: string, folder: string): string | undefined {
  const root = resolved(folder);
  if (root === undefined) return undefined;
  let existing = given;
  const rest: string[] = [];
  let real = resolved(existing);
  while (real === undefined) {
    const parent = path.dirname(existing);
    if (parent === existing) return undefined;
    rest.unshift(path.basename(existing));
    existing = parent;
    real = resolved(existing);
  }
  const inside = path.relative(root, path.join(real, ...rest));
  if (inside === '..' || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside))
    return undefined;
  return inside;
}
