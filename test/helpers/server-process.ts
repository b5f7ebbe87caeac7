import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The real `canopy-server` command as a child process, for tests that crash or restart it.

/** The `canopy-server` command's script, run with Node. */
export const SERVER_BIN = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'bin',
  'canopy-server.js',
);

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** What the server wrote on stderr so far: the problems it tells its operator. */
  readonly stderr: () => string;
  /** Run under another command, in a process group of its own. */
  readonly group: boolean;
}

/**
 * Serves `dataDir` on `port` (by default, any free one); run by the command `under` (with its
 * arguments: strace, to fail its reads as a failing disk would) when given.
 */
export async function startServerProcess(
  dataDir: string,
  extraArgs: readonly string[] = [],
  port = 0,
  under: readonly string[] = [],
): Promise<ServerProcess> {
  const command = [
    ...under,
    process.execPath,
    SERVER_BIN,
    'serve',
    '--port',
    String(port),
    '--data',
    dataDir,
    '--json',
    ...extraArgs,
  ];
  // A process group of its own under another command, to be signalled whole: strace, tracing
  // into a file, holds off fatal signals to itself.
  const child = spawn(command[0] as string, command.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: under.length > 0,
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    stderr += text;
  });
  const lines = createInterface({ input: child.stdout });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`canopy-server exited early with ${code}`)));
    lines.once('line', (line) => resolve((JSON.parse(line) as { listening: string }).listening));
  });
  return { child, url, stderr: () => stderr, group: under.length > 0 };
}

/** `canopy-server args`, run by the command `under` (with its arguments) when given. */
export function runServerCommand(
  args: readonly string[],
  under: readonly string[] = [],
): {
  status: number;
  stdout: string;
  stderr: string;
} {
  const command = [...under, process.execPath, SERVER_BIN, ...args];
  const result = spawnSync(command[0] as string, command.slice(1), { encoding: 'utf8' });
  return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
}

export async function stopServerProcess(
  server: ServerProcess,
  signal: NodeJS.Signals,
): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) =>
    server.child.once('exit', (code) => resolve(code)),
  );
  const { pid } = server.child;
  if (server.group && pid !== undefined) process.kill(-pid, signal);
  else server.child.kill(signal);
  return exited;
}

/** A new user of the service on `dataDir`, by `canopy-server user add`: its enrollment code. */
export function addUserCode(dataDir: string, email: string): string {
  const added = runServerCommand(['user', 'add', '--email', email, '--data', dataDir, '--json']);
  if (added.status !== 0) throw new Error(added.stderr);
  return (JSON.parse(added.stdout) as { code: string }).code;
}
