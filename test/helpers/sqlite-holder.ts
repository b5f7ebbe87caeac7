import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// Another process with a SQLite file open, as a second Canopy command is: it runs `holding`
// (JavaScript with `db`, a better-sqlite3 connection to the file, in scope) and then prints one
// line, once the lock it took is held. A test then does what meets that lock, and reads the
// other process's exit (or kills it) after.

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs `holding` then `then` in another process with `file` open as `db`; resolves once
 * `holding` ran. `then` may keep the lock (a timer that never ends, until the test kills it),
 * or let it go after a while and exit.
 */
export async function anotherProcessHolding(
  file: string,
  holding: string,
  then: string,
): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const db = new (require('better-sqlite3'))(process.argv[1]);
       ${holding}
       process.stdout.write('holding\\n');
       ${then}`,
      file,
    ],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the other process exited early (${code})`)));
    child.stdout?.once('data', () => resolve());
  });
  return child;
}

/** The exit code of `child`, once it has exited. */
export async function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  return new Promise((resolve) => child.once('exit', resolve));
}
