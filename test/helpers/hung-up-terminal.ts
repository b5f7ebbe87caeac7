import { spawn } from 'node:child_process';

// A command run on a terminal of its own (a pseudo-terminal, as ssh and a terminal window give
// it), which the test then hangs up, as a dropped ssh session or a closed window does: the
// kernel sends the command SIGHUP, and every write to the terminal after fails with EIO.
// Python's pty module makes the terminal: Node has none of its own, and python3 is on every
// machine that builds Canopy's native modules. Python keeps reading what the command shows
// (a terminal that nobody reads fills up and stops the command's writes), hangs up when told
// on its stdin, then prints how the command ended.
// In the background (as `canopy backup DIR &` then `disown`, or a shell's job left running at
// logout), the command runs in a process group of its own under a shell-like session leader
// that outlives the hang-up: the kernel sends SIGHUP only to the session leader and the
// foreground group, so the command gets none, and runs on with a terminal it can no longer
// write to.

const DRIVER = String.raw`
import json, os, pty, select, sys
import signal
background = sys.argv[1] == 'background'
command = sys.argv[2:]
pid, master = pty.fork()
if pid == 0:
    if not background:
        os.execvpe(command[0], command, os.environ)
    job = os.fork()
    if job == 0:
        os.setpgid(0, 0)
        os.execvpe(command[0], command, os.environ)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _, status = os.waitpid(job, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))
shown = b''
while True:
    ready, _, _ = select.select([master, sys.stdin], [], [])
    if sys.stdin in ready:
        sys.stdin.readline()
        break
    try:
        chunk = os.read(master, 65536)
    except OSError:
        chunk = b''
    if not chunk:
        break
    shown += chunk
os.close(master)
_, status = os.waitpid(pid, 0)
print(json.dumps({
    'code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
    'signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
    'shown': shown.decode('utf-8', 'replace'),
}))
`;

/** How a command on a terminal ended: its exit code, or the signal that killed it. */
export interface TerminalEnd {
  readonly code: number | null;
  readonly signal: number | null;
  /** What it showed on the terminal before the hang-up. */
  readonly shown: string;
}

/** A command running on a terminal of its own. */
export interface TerminalCommand {
  /** Closes the terminal, as a dropped ssh session does, and waits for the command to end. */
  hangUp(): Promise<TerminalEnd>;
}

/** Runs `command args` on a new terminal, with `env`; in the foreground unless asked. */
export function onTerminal(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { background?: boolean } = {},
): TerminalCommand {
  const mode = options.background === true ? 'background' : 'foreground';
  const driver = spawn('python3', ['-c', DRIVER, mode, command, ...args], {
    env,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let output = '';
  driver.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const ended = new Promise<TerminalEnd>((resolve, reject) => {
    driver.on('error', reject);
    driver.on('close', (status) => {
      if (status !== 0) reject(new Error(`the terminal's driver failed (exit ${status})`));
      else resolve(JSON.parse(output) as TerminalEnd);
    });
  });
  driver.stdin.on('error', (error: NodeJS.ErrnoException) => {
    // The driver gone before the hang-up (the command ended by itself): `ended` tells how.
    if (error.code !== 'EPIPE') throw error;
  });
  return {
    hangUp: () => {
      driver.stdin.end('hang up\n');
      return ended;
    },
  };
}
