import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCanopy } from '../helpers/canopy-cli.ts';

// `canopy --help` and `canopy COMMAND --help`: what a user reads before anything else. Help
// loads no engine and touches no home.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-help-'));
const home = path.join(scratch, 'home');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('canopy help', () => {
  it('lists every command with --help, and with no command says so with the usage status', async () => {
    const asked = await runCanopy(home, ['--help']);
    expect(asked.status).toBe(0);
    for (const command of ['login', 'backup', 'versions', 'ls', 'restore', 'diff', 'verify'])
      expect(asked.stdout).toMatch(new RegExp(`^ {2}${command} `, 'm'));
    expect(asked.stdout).toContain('exit status: 0 done, 1 failed, 2 usage');
    const bare = await runCanopy(home, []);
    expect(bare.status).toBe(2);
    expect(bare.stdout).toBe(asked.stdout);
    expect(existsSync(home)).toBe(false);
  });

  it("says Canopy's version with --version alone, and takes it with a command as a version's ID", async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    const asked = await runCanopy(home, ['--version']);
    expect(asked).toMatchObject({ status: 0, stdout: `canopy ${version}\n` });
    const withCommand = await runCanopy(home, ['ls', '--version']);
    expect(withCommand.status).toBe(2);
    expect(withCommand.stderr).toMatch(/^canopy: --version needs a value\nusage:\n {2}ls --bucket/);
    expect(existsSync(home)).toBe(false);
  });

  it("tells an option mistyped, or given a value it does not take, with the command's lines", async () => {
    const mistyped = await runCanopy(home, ['restore', '--buckett', 'Photos']);
    expect(mistyped.status).toBe(2);
    expect(mistyped.stderr).toMatch(
      /^canopy: unknown option --buckett \(a name that begins with - goes after a --\)\nusage:\n {2}restore --bucket NAME/,
    );
    const valued = await runCanopy(home, ['--bucket', 'Photos', 'restore', '--overwrite=yes']);
    expect(valued.status).toBe(2);
    expect(valued.stderr).toMatch(/^canopy: --overwrite takes no value\nusage:\n {2}restore /);
    const followed = await runCanopy(home, ['ls', '--bucket', '--version', 'x']);
    expect(followed.status).toBe(2);
    expect(followed.stderr).toMatch(
      /^canopy: --bucket needs a value \(one that begins with - is written --bucket=-VALUE\)\nusage:\n {2}ls /,
    );
    // Before any command: the error alone.
    const bare = await runCanopy(home, ['--bucket']);
    expect(bare).toMatchObject({ status: 2, stderr: 'canopy: --bucket needs a value\n' });
    expect(existsSync(home)).toBe(false);
  });

  it("shows one command's own lines, with the notes that hold for every command", async () => {
    const asked = await runCanopy(home, ['restore', '-h']);
    expect(asked.status).toBe(0);
    expect(asked.stdout).toMatch(/^ {2}restore --bucket NAME .*--to DIR/m);
    expect(asked.stdout).toContain('--sparse leaves runs of zeros as holes');
    expect(asked.stdout).not.toMatch(/^ {2}(backup|verify|ls) /m);
    expect(asked.stdout).toContain("a version's or snapshot's ID may be its first characters");
    // A word that names no command gets the whole help.
    const unknown = await runCanopy(home, ['restor', '--help']);
    expect(unknown.status).toBe(0);
    expect(unknown.stdout).toMatch(/^ {2}backup DIR/m);
    expect(existsSync(home)).toBe(false);
  });
});
