import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The code runs from its sources (through tsx), or bundled into a few files in dist/ (npm run
// build), where a module no longer sits beside the files it sat beside in the sources: both
// databases' migration folders would have been looked for in the same folder of the bundle.
// So the files Canopy reads at run time are found from the package's root, the first folder
// above this module whose package.json names Canopy, at the same place from either.

interface Manifest {
  readonly name?: unknown;
  readonly version?: unknown;
}

let found: { readonly root: string; readonly manifest: Manifest } | undefined;

function packageOf(): { readonly root: string; readonly manifest: Manifest } {
  if (found) return found;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as Manifest;
      if (manifest.name === 'canopy') return (found = { root: dir, manifest });
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error("Canopy's package.json was not found above its code");
    dir = parent;
  }
}

/** The path of `relative` (a path such as `main/state/migrations`) in Canopy's package. */
export function packageFile(relative: string): string {
  return path.join(packageOf().root, relative);
}

/** The version of Canopy, as its package.json states it. */
export function packageVersion(): string {
  const { version } = packageOf().manifest;
  if (typeof version !== 'string') throw new Error("Canopy's package.json states no version");
  return version;
}
