import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// A script of test/helpers (crashing-backup.ts, stalled-backup.ts) run as a process of its own
// through tsx, as a device is: a test kills it where it wants, and reads what it printed when
// it did not die as planned.

const HELPERS = path.dirname(fileURLToPath(import.meta.url));

export interface HelperProcess {
  readonly child: ChildProcess;
  /** The signal that ended it (null when it exited), once it is gone; and its exit code. */
  readonly exited: Promise<{
    readonly code: number | null;
    readonly signal: NodeJS.Signals | null;
  }>;
  /** What it printed so far, standard output and error together. */
  output(): string;
}

/** Runs test/helpers/`script`.ts with `args`. */
export function runHelper(script: string, args: readonly string[]): HelperProcess {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(HELPERS, `${script}.ts`), ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, output: () => output };
}
