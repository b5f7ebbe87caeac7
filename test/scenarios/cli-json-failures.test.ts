import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loginWithBucket, runCanopy, type CliResult } from '../helpers/canopy-cli.ts';

// With --json a command that fails says so as one JSON line on stderr, which a script parses to
// branch on the failure's stable code; the exit status is the one a person sees, and stdout
// stays empty.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-json-failures-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

/** The one JSON line `run` wrote on stderr, after checking that it wrote nothing else. */
function failureOf(run: CliResult): unknown {
  expect(run.stdout).toBe('');
  expect(run.stderr.endsWith('\n')).toBe(true);
  expect(run.stderr.slice(0, -1)).not.toContain('\n');
  return JSON.parse(run.stderr);
}

describe('failures with --json', () => {
  it('tell a command line that cannot run with the usage code and status, without the help lines', async () => {
    const home = path.join(scratch, 'unused');
    const missing = await runCanopy(home, ['restore', '--json'], env);
    expect(missing.status).toBe(2);
    expect(failureOf(missing)).toEqual({
      error: { code: 'usage', message: '--bucket is required', retryable: false },
    });
    const mistyped = await runCanopy(home, ['ls', '--buckett', 'Docs', '--json'], env);
    expect(mistyped.status).toBe(2);
    expect(failureOf(mistyped)).toEqual({
      error: {
        code: 'usage',
        message: 'unknown option --buckett (a name that begins with - goes after a --)',
        retryable: false,
      },
    });
    const bare = await runCanopy(home, ['--json'], env);
    expect(bare.status).toBe(2);
    expect(failureOf(bare)).toEqual({
      error: { code: 'usage', message: 'a command is required', retryable: false },
    });
    // Without --json, the same as text with the command's lines.
    const told = await runCanopy(home, ['restore'], env);
    expect(told.status).toBe(2);
    expect(told.stderr).toMatch(/^canopy: --bucket is required\nusage:\n {2}restore --bucket/);
  });

  it("tell the engine's failures by their code: not logged in, then a bucket that is not there", async () => {
    const home = path.join(scratch, 'home');
    const early = await runCanopy(home, ['versions', '--bucket', 'Docs', '--json'], env);
    expect(early.status).toBe(1);
    expect(failureOf(early)).toMatchObject({ error: { code: 'not_logged_in', retryable: false } });

    await loginWithBucket(home, path.join(scratch, 'local'), 'Docs');
    const noBucket = await runCanopy(home, ['versions', '--bucket', 'Photos', '--json'], env);
    expect(noBucket.status).toBe(1);
    const told = await runCanopy(home, ['versions', '--bucket', 'Photos'], env);
    expect(failureOf(noBucket)).toEqual({
      error: {
        code: 'not_found',
        message: told.stderr.slice('canopy: '.length, -1),
        retryable: false,
      },
    });
    expect(told.stderr).toMatch(/^canopy: no bucket named "Photos"/);
  });
});
