import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Canopy's own version, as its package.json states it: `canopy --version`. The command runs
// from cli/ through tsx or from dist/cli/ once built, so the file is looked for upward.

/** The version of the Canopy this file is part of. */
export function appVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === 'canopy' && typeof manifest.version === 'string')
        return manifest.version;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error("Canopy's package.json was not found above its command");
    dir = parent;
  }
}
