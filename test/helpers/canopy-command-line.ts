import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The `canopy` command's script. */
export const CANOPY_SCRIPT = fileURLToPath(new URL('../../bin/canopy.js', import.meta.url));

/**
 * How the `canopy` command starts Node: the environment and flags on its
 * `#!/usr/bin/env -S [NAME=VALUE ...] node [--flag ...]` line, so that a test or a bench runs it
 * as a user's shell would.
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

/**
 * `node` and what to give it to run `canopy ARGS` as a user's shell would: the flags of the
 * script's first line, then the script and ARGS; and its environment, the line's settings over
 * `env` (as they override a user's own).
 */
export function canopyProcess(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): { command: string; args: string[]; env: NodeJS.ProcessEnv } {
  const line = canopyCommandLine();
  return {
    command: process.execPath,
    args: [...line.flags, CANOPY_SCRIPT, ...args],
    env: { ...env, ...line.env },
  };
}
