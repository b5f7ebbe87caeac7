import { spawn } from 'node:child_process';

// A command run on a terminal of its own (a pseudo-terminal, as ssh and a terminal window give
// it), at which the test types lines, or which it hangs up, as a dropped ssh session or a
// closed window does: the kernel sends the command SIGHUP, and every write to the terminal
// after fails with EIO.
// Python's pty module makes the terminal: Node has none of its own, and python3 is on every
// machine that builds Canopy's native modules. Python keeps reading what the command shows
// (a terminal that nobody reads fills up and stops the command's writes) and passes it on as it
// comes, types or hangs up when told on its stdin, and once the command ends tells how it ended.
// In the background (as `canopy backup DIR &` then `disown`, or a shell's job left running at
// logout), the command runs in a process group of its own under a shell-like session leader
// that outlives the hang-up: the kernel sends SIGHUP only to the session leader and the
// foreground group, so the command gets none, and runs on with a terminal it can no longer
// write to.

const DRIVER = String.raw`
import json, os, pty, select, sys
import fcntl, signal, struct, termios
background = sys.argv[1] == 'background'
columns = int(sys.argv[2])
command = sys.argv[3:]
pid, master = pty.fork()
if pid == 0:
    if columns > 0:
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack('HHHH', 24, columns, 0, 0))
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
told = b''
hung_up = False
while not hung_up:
    ready, _, _ = select.select([master, 0], [], [])
    if 0 in ready:
        read = os.read(0, 65536)
        told += read if read else b'hang up\n'
        while b'\n' in told and not hung_up:
            line, told = told.split(b'\n', 1)
            if line.startswith(b'type:'):
                os.write(master, line[5:] + b'\n')
            elif line == b'end input':
                os.write(master, b'\x04')
            else:
                hung_up = True
        continue
    try:
        chunk = os.read(master, 65536)
    except OSError:
        chunk = b''
    if not chunk:
        break
    print(json.dumps({'shown': chunk.hex()}), flush=True)
os.close(master)
_, status = os.waitpid(pid, 0)
print(json.dumps({
    'code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
    'signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
}), flush=True)
`;

/** How a command on a terminal ended: its exit code, or the signal that killed it. */
export interface TerminalEnd {
  readonly code: number | null;
  readonly signal: number | null;
  /** What it showed on the terminal (before the hang-up, if hung up). */
  readonly shown: string;
}

/** A command running on a terminal of its own. */
export interface TerminalCommand {
  /** Resolves once the terminal has shown `text`. */
  shows(text: string): Promise<void>;
  /** Types `line` at the terminal, and Enter. */
  type(line: string): void;
  /** Ends the input, as Ctrl-D at the start of a line does. */
  endInput(): void;
  /** How the command ended, once it ends by itself. */
  readonly ended: Promise<TerminalEnd>;
  /** Closes the terminal, as a dropped ssh session does, and waits for the command to end. */
  hangUp(): Promise<TerminalEnd>;
}

/** Runs `command args` on a new terminal, with `env`; in the foreground unless asked. */
export function onTerminal(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: {
    background?: boolean;
    /** The terminal's width; pty's own (0: unknown) unless given. */
    columns?: number;
  } = {},
): TerminalCommand {
  const mode = options.background === true ? 'background' : 'foreground';
  const columns = String(options.columns ?? 0);
  const driver = spawn('python3', ['-c', DRIVER, mode, columns, command, ...args], {
    env,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let shown = Buffer.alloc(0);
  let lineStart = '';
  let end: { code: number | null; signal: number | null } | undefined;
  const watchers: { text: string; resolve: () => void }[] = [];
  const showing = (): void => {
    const text = shown.toString('utf8');
    for (const watcher of watchers.splice(0))
      if (text.includes(watcher.text)) watcher.resolve();
      else watchers.push(watcher);
  };
  driver.stdout.on('data', (chunk: Buffer) => {
    const lines = (lineStart + chunk.toString()).split('\n');
    lineStart = lines.pop() ?? '';
    for (const line of lines) {
      const told = JSON.parse(line) as {
        shown?: string;
        code?: number | null;
        signal?: number | null;
      };
      if (told.shown === undefined) end = { code: told.code ?? null, signal: told.signal ?? null };
      else shown = Buffer.concat([shown, Buffer.from(told.shown, 'hex')]);
    }
    showing();
  });
  const ended = new Promise<TerminalEnd>((resolve, reject) => {
    driver.on('error', reject);
    driver.on('close', (status) => {
      if (status !== 0 || end === undefined)
        reject(new Error(`the terminal's driver failed (exit ${status})`));
      else resolve({ ...end, shown: shown.toString('utf8') });
    });
  });
  driver.stdin.on('error', (error: NodeJS.ErrnoException) => {
    // The driver gone before the hang-up (the command ended by itself): `ended` tells how.
    if (error.code !== 'EPIPE') throw error;
  });
  return {
    shows: (text) =>
      new Promise((resolve, reject) => {
        watchers.push({ text, resolve });
        showing();
        void ended.then(
          (end) =>
            reject(
              new Error(
                `the command ended (${JSON.stringify(end)}) without showing ${JSON.stringify(text)}`,
              ),
            ),
          reject,
        );
      }),
    type: (line) => driver.stdin.write(`type:${line}\n`),
    // EOT, which the terminal reads as the end of the input at the start of a line.
    endInput: () => driver.stdin.write('end input\n'),
    ended,
    hangUp: () => {
      driver.stdin.end('hang up\n');
      return ended;
    },
  };
}
