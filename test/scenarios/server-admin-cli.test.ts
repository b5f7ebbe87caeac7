import { afterAll, describe, expect, it } from 'vitest';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  runServerCommand,
  startServerProcess,
  stopServerProcess,
} from '../helpers/server-process.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// `canopy-server`'s administration, as the person who hosts it runs it (often from a script
// that provisions a household's users): a command refused is told in one line with the exit
// status of its kind, and with --json as one JSON line with a stable code.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-server-admin-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const data = ['--data', path.join(scratch, 'data')];

/** `canopy-server ARGS` run as nobody: root may listen on any port and write anywhere. */
function runServerAsNobody(args: readonly string[]): ReturnType<typeof runServerCommand> {
  const run = spawnSync(
    'setpriv',
    [
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      process.execPath,
      'bin/canopy-server.js',
    ].concat(args),
    { encoding: 'utf8' },
  );
  return { status: run.status ?? -1, stdout: run.stdout, stderr: run.stderr };
}

describe('canopy-server administration', () => {
  it('refuses a user added twice, or not there, with status 1 and a code a script can branch on', () => {
    const added = runServerCommand(['user', 'add', '--email', 'ann@example.org', ...data]);
    expect(added.status, added.stderr).toBe(0);
    // Valid until a time on this computer's clock, as canopy tells times.
    expect(added.stdout).toMatch(
      new RegExp(`^user \\S+\\nenrollment code \\S+ \\(valid until ${TOLD_TIME}\\)\\n$`),
    );

    const twice = runServerCommand(['user', 'add', '--email', 'ann@example.org', ...data]);
    expect(twice).toMatchObject({
      status: 1,
      stdout: '',
      stderr: 'canopy-server: a user with email ann@example.org already exists\n',
    });
    const scripted = runServerCommand([
      'user',
      'add',
      '--email',
      'ann@example.org',
      '--json',
      ...data,
    ]);
    expect(scripted).toMatchObject({ status: 1, stdout: '' });
    expect(JSON.parse(scripted.stderr)).toEqual({
      error: { code: 'user_exists', message: 'a user with email ann@example.org already exists' },
    });
    const nobody = runServerCommand([
      'enroll-code',
      '--email',
      'bob@example.org',
      '--json',
      ...data,
    ]);
    expect(nobody.status).toBe(1);
    expect(JSON.parse(nobody.stderr)).toEqual({
      error: { code: 'user_not_found', message: 'no user with email bob@example.org' },
    });
    // Ann is there as before: the refused commands changed nothing.
    const code = runServerCommand(['enroll-code', '--email', 'ann@example.org', '--json', ...data]);
    expect(code.status, code.stderr).toBe(0);
  });

  it('tells input it cannot take, an option without its value among it, with the usage status', () => {
    const severity = ['notify', '--email', 'ann@example.org', '--message', 'hello'];
    const wrong = runServerCommand([...severity, '--severity', 'loud', '--json', ...data]);
    expect(wrong.status).toBe(2);
    expect(JSON.parse(wrong.stderr)).toEqual({
      error: { code: 'invalid_input', message: 'severity must be one of info, warning, error' },
    });
    const bare = runServerCommand(['serve', '--port', ...data]);
    expect(bare.status).toBe(2);
    // In our words, as `canopy` says it, not in Node's notation.
    expect(bare.stderr).toMatch(
      /^canopy-server: --port needs a value \(one that begins with - is written --port=-VALUE\)\n/,
    );
    expect(bare.stderr).toContain('usage: canopy-server <command>');
    const misspelt = runServerCommand(['user', 'add', '--emial', 'ann@example.org', '--json']);
    expect(misspelt.status).toBe(2);
    expect(JSON.parse(misspelt.stderr)).toEqual({
      error: {
        code: 'usage',
        message: 'unknown option --emial (a name that begins with - goes after a --)',
      },
    });
    const none = runServerCommand(['--json', ...data]);
    expect(none).toMatchObject({ status: 2, stdout: '' });
    expect(JSON.parse(none.stderr)).toEqual({
      error: { code: 'usage', message: 'a command is required' },
    });
    const missing = runServerCommand([
      'user',
      'quota',
      '--email',
      'ann@example.org',
      '--json',
      ...data,
    ]);
    expect(missing.status).toBe(2);
    expect(JSON.parse(missing.stderr)).toEqual({
      error: { code: 'usage', message: '--quota is required' },
    });
  });

  it('says a port is taken by another program, with a code of its own', async () => {
    const running = await startServerProcess(path.join(scratch, 'running'));
    try {
      const port = new URL(running.url).port;
      const second = runServerCommand(['serve', '--port', port, ...data]);
      expect(second).toMatchObject({
        status: 1,
        stderr: `canopy-server: port ${port} on 127.0.0.1 is taken by another program (a canopy-server already running there, perhaps); stop it, or choose another port with --port\n`,
      });
      const scripted = runServerCommand(['serve', '--port', port, '--json', ...data]);
      expect(scripted.status).toBe(1);
      expect(JSON.parse(scripted.stderr)).toMatchObject({ error: { code: 'port_in_use' } });
    } finally {
      await stopServerProcess(running, 'SIGTERM');
    }
  });

  it('says a port is not this user to take, or an address not this computer to listen on', () => {
    // Ports below 1024 are root's: run as nobody, on a data folder of its own.
    const own = path.join(scratch, 'nobody');
    chmodSync(scratch, 0o755);
    mkdirSync(own);
    chownSync(own, 65534, 65534);
    const low = runServerAsNobody(['serve', '--port', '80', '--data', own, '--json']);
    expect(low.status, low.stderr).toBe(1);
    expect(JSON.parse(low.stderr)).toEqual({
      error: {
        code: 'port_not_allowed',
        message:
          'this user may not listen on port 80 (ports below 1024 are for root); choose another with --port',
      },
    });
    // 192.0.2.1 is set aside for documentation: no computer has it.
    const elsewhere = runServerCommand(['serve', '--host', '192.0.2.1', '--port', '0', ...data]);
    expect(elsewhere.status).toBe(1);
    expect(elsewhere.stderr.split('\n').at(-2)).toBe(
      'canopy-server: 192.0.2.1 is not an address of this computer; --host takes one of its own (127.0.0.1 by default, 0.0.0.0 for all)',
    );
  });

  it('names a data folder this user may not write, and the option that chooses another', () => {
    // Root writes anywhere: run as nobody, beside a folder only root may write in.
    const closed = path.join(scratch, 'closed');
    chmodSync(scratch, 0o755);
    const run = runServerAsNobody([
      'user',
      'add',
      '--email',
      'ann@example.org',
      '--data',
      closed,
      '--json',
    ]);
    expect(run.status, run.stderr).toBe(1);
    expect(JSON.parse(run.stderr)).toEqual({
      error: {
        code: 'data_not_writable',
        message: `cannot write in ${closed}: permission denied; choose a data folder this user may write with --data`,
      },
    });
  });
});
