import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopyProcess } from '../helpers/canopy-command-line.ts';
import { loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A reader that goes away before a command's output ends, as `canopy ls -R | head` or a
// backup's progress piped into a program that quits: the command runs on to its end, with no
// stack trace, and a backup stores its version all the same.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-closed-output-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

/**
 * Runs `canopy ARGS` in `home` with its output `closed` ('stdout' or 'stderr') closed once the
 * first bytes arrive there, or at once when `atOnce`; its exit status and what the other said.
 */
function runWithReaderGone(
  home: string,
  args: readonly string[],
  closed: 'stdout' | 'stderr',
  atOnce = false,
): Promise<{ status: number; other: string }> {
  return new Promise((resolve, reject) => {
    const canopy = canopyProcess(args, { ...process.env, CANOPY_HOME: home, ...env });
    const child = spawn(canopy.command, canopy.args, {
      env: canopy.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const gone = closed === 'stdout' ? child.stdout : child.stderr;
    const kept = closed === 'stdout' ? child.stderr : child.stdout;
    if (atOnce) gone.destroy();
    else gone.once('data', () => gone.destroy());
    let other = '';
    kept.on('data', (chunk: Buffer) => {
      other += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status: status ?? -1, other }));
  });
}

describe('an output whose reader goes away', () => {
  it('ends what is written, not the command: a listing ends quietly, a backup stores its version', async () => {
    const home = path.join(scratch, 'home');
    await loginWithBucket(home, path.join(scratch, 'local'), 'Pipes');
    const source = path.join(scratch, 'source');
    // More lines than a pipe holds, so the listing is still writing when its reader goes.
    for (let i = 0; i < 2000; i += 1)
      writeSettled(
        path.join(source, `folder-${i % 20}`, `a-file-with-a-long-name-${i}.txt`),
        `${i}`,
      );
    const first = await runCanopy(home, ['backup', source, '--bucket', 'Pipes'], env);
    expect(first.status, first.stderr).toBe(0);

    const listed = await runWithReaderGone(home, ['ls', '--bucket', 'Pipes', '-R'], 'stdout');
    expect(listed).toEqual({ status: 0, other: '' });

    writeSettled(path.join(source, 'new.txt'), 'new');
    const backup = await runWithReaderGone(
      home,
      ['backup', source, '--bucket', 'Pipes', '--progress'],
      'stderr',
      true,
    );
    expect(backup.status).toBe(0);
    expect(backup.other).toMatch(/^version /);
    const versions = await runCanopy(home, ['versions', '--bucket', 'Pipes', '--json'], env);
    expect(JSON.parse(versions.stdout)).toHaveLength(2);
    const names = await runCanopy(home, ['ls', '--bucket', 'Pipes'], env);
    expect(names.stdout).toContain('new.txt');
  });
});
