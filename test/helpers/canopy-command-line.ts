import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The `canopy` command's script. */
export const CANOPY_SCRIPT = fileURLToPath(new URL('../bin/canopy.js', import.meta.url));

/**
 * How the `canopy` command starts Node: the environment and flags on its
 * `#!/usr/bin/env -S [NAME=VALUE ...] node [--flag ...]` line, so that a bench runs it as a
 * user's shell would.
 */
export function canopyCommandLine(): { env: Record<string, string>; flags: string[] } {
  const shebang = readFileSync(CANOPY_SCRIPT, 'utf8').split('\n')[0] ?? '';
  const line = /^#!\/usr\/bin\/env -S((?: [A-Z_]+=[^ ]+)*) node((?: --[^ ]+)*)$/.exec(shebang);
  if (!line)
    throw new Error(`${path.basename(CANOPY_SCRIPT)} starts with an unexpected line: ${shebang}`);
  const words = (text: string | undefined): string[] =>
    text?.trim().split(' ').filter(Boolean) ?? [];
  const env = Object.fromEntries(
    words(line[1]).map((assignment) => {
      const at = assignment.indexOf('=');
      return [assignment.slice(0, at), assignment.slice(at + 1)];
    }),
  );
  return { env, flags: words(line[2]) };
}
