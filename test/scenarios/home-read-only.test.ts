import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';

// The disk of the Canopy home made read-only, as the system does to a disk after errors
// (ext4's errors=remount-ro): SQLite's "unable to open database file" reached the user as an
// unexpected failure with a stack. It is told as the read-only disk it is, with the way to
// restore from the backups meanwhile. (A bind mount of the home remounted read-only, as root;
// one made read-only under a running engine is told alike: home-errors.test.ts.)

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-home-read-only-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };
const told = (home: string): string =>
  `cannot write in ${home}, where Canopy keeps its state: the disk is read-only (one the system made read-only after errors may be failing: to restore from your backups meanwhile, set CANOPY_HOME to a folder on another disk and log in there)`;

/** Runs `work` with `dir` read-only, as a disk remounted read-only. */
async function whileReadOnly(dir: string, work: () => Promise<void>): Promise<void> {
  execFileSync('mount', ['--bind', dir, dir]);
  try {
    execFileSync('mount', ['-o', 'remount,bind,ro', dir]);
    await work();
  } finally {
    execFileSync('umount', [dir]);
  }
}

describe('a Canopy home on a disk made read-only', () => {
  it('is told as such, and all goes on once it is writable again', async () => {
    const home = path.join(scratch, 'home');
    const source = path.join(scratch, 'source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'notes.txt'), 'kept');
    const login = await runCanopy(
      home,
      ['login', '--local', '--data', path.join(scratch, 'backups')],
      env,
    );
    expect(login.status, login.stderr).toBe(0);
    expect((await runCanopy(home, ['buckets', 'create', 'Notes'], env)).status).toBe(0);
    expect((await runCanopy(home, ['backup', source, '--bucket', 'Notes'], env)).status).toBe(0);

    await whileReadOnly(home, async () => {
      const listed = await runCanopy(home, ['buckets'], env);
      expect(listed).toMatchObject({ status: 1, stdout: '', stderr: `canopy: ${told(home)}\n` });
      const json = await runCanopy(home, ['ls', '--bucket', 'Notes', '--json'], env);
      expect(JSON.parse(json.stderr)).toEqual({
        error: { code: 'permission_denied', message: told(home), retryable: false },
      });
    });

    // Writable again: all goes on as before.
    const again = await runCanopy(home, ['backup', source, '--bucket', 'Notes'], env);
    expect(again.status, again.stderr).toBe(0);
  });
});
