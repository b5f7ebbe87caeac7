import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { damageHeader, damageTable } from '../helpers/damaged-database.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// Canopy's own state database damaged on its disk (a failing disk, a power cut on a disk that
// lied about its writes), as `canopy` meets it: the command that reads the damaged page sets
// the database aside, rebuilds it from what is intact, runs again, and says what was lost.
// Nothing on the server is touched, and every backup stays restorable.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-state-damaged-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

/** A home logged in to its own local service, with a folder of 20 files backed up to 'Docs'. */
async function backedUp(name: string) {
  const run = path.join(scratch, name);
  const home = path.join(run, 'home');
  const source = path.join(run, 'source');
  for (let i = 0; i < 20; i += 1)
    writeSettled(path.join(source, `doc-${i}.bin`), randomBytes(20_000 + i));
  writeSettled(path.join(source, 'scratch.tmp2'), 'not to be kept');
  await loginWithBucket(home, path.join(run, 'local'), 'Docs');
  const rule = await runCanopy(home, ['excludes', source, '--add', '*.tmp2'], env);
  expect(rule.status, rule.stderr).toBe(0);
  const first = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], env);
  expect(first.status, first.stderr).toBe(0);
  return { run, home, source, state: path.join(home, 'state.sqlite') };
}

/** Restores 'Docs' into `<run>/<into>` and expects the folder as it is, but the excluded file. */
async function expectRestorable(home: string, run: string, source: string, into: string) {
  const target = path.join(run, into);
  const restored = await runCanopy(home, ['restore', '--bucket', 'Docs', '--to', target], env);
  expect(restored.status, restored.stderr).toBe(0);
  const names = readdirSync(source).filter((name) => name !== 'scratch.tmp2');
  expect(readdirSync(target).sort()).toEqual(names.sort());
  for (const name of names)
    expect(
      readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
    ).toBe(true);
}

describe('a damaged state database', () => {
  it('in its file index: the backup rebuilds it, reads every file again, sends no data again, and keeps the exclude rules', async () => {
    const { run, home, source, state } = await backedUp('file-index');
    damageTable(state, 'file_index');

    const again = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], env);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toContain(
      "canopy: Canopy's state database was found damaged (database disk image is malformed); rebuilding it, then running the command again",
    );
    expect(again.stderr).toMatch(
      /it is kept as .*state\.sqlite\.damaged-\S+, and a new one was made/,
    );
    expect(again.stderr).toContain('the next backup of each folder reads every file again');
    expect(again.stderr).not.toContain('log in again');
    // Every file read again, none of its data sent again; the rule still keeps scratch.tmp2 out.
    expect(again.stdout).toContain('20 files (0 unchanged, not read again)');
    expect(again.stdout).toContain(' 0 B new');
    expect(readdirSync(home).filter((name) => name.includes('.damaged-'))).toHaveLength(1);

    const rules = await runCanopy(home, ['excludes', source], env);
    expect(rules.stdout).toContain('*.tmp2');
    // The next backup finds the index rebuilt by the one before.
    const third = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], env);
    expect(third.stderr).toBe('');
    expect(third.stdout).toContain('20 files (20 unchanged, not read again)');
    await expectRestorable(home, run, source, 'restored');
  });

  it('beyond reading: the login is lost and said so, and logging in again finds every backup', async () => {
    const { run, home, source, state } = await backedUp('header');
    damageHeader(state);

    const versions = await runCanopy(home, ['versions', '--bucket', 'Docs'], env);
    expect(versions.status).toBe(1);
    expect(versions.stderr).toContain(
      "this device's login could not be read from it: log in again",
    );
    expect(versions.stderr).toContain(
      'the exclude rules kept with `canopy excludes` could not be read',
    );
    expect(versions.stderr).toContain('canopy: this device is not logged in');

    const login = await runCanopy(
      home,
      ['login', '--local', '--data', path.join(run, 'local')],
      env,
    );
    expect(login.status, login.stderr).toBe(0);
    expect(login.stderr).toBe('');
    const listed = await runCanopy(home, ['versions', '--bucket', 'Docs'], env);
    expect(listed.stdout).toMatch(/\sactive\s/);
    await expectRestorable(home, run, source, 'restored');
    expect(existsSync(state)).toBe(true);
  });

  it("of the embedded service: the copy it keeps is put in its place, the command runs again, and the device's own state is left as it is", async () => {
    const { run, home, source } = await backedUp('service');
    const local = path.join(run, 'local');
    // The service keeps a copy of its database, made as the backup's command ended.
    expect(existsSync(path.join(local, 'service.sqlite.copy'))).toBe(true);
    damageTable(path.join(local, 'service.sqlite'), 'versions');

    const again = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], env);
    expect(again.status, again.stderr).toBe(0);
    const lines = again.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(
      'canopy: the database of the backups (service.sqlite) was found damaged on its disk; putting the copy Canopy keeps of it in its place, then running the command again',
    );
    expect(lines[1]).toMatch(
      new RegExp(
        `^canopy: the database of the backups was damaged: it is kept as .*\\/local\\/service\\.sqlite\\.damaged-\\S+, and the copy Canopy made of it at ${TOLD_TIME} is in its place; anything backed up after then is not in it, and the next backup of each folder sends it again$`,
      ),
    );
    // The copy holds the version the backup made: nothing changed since.
    expect(again.stdout).toContain('nothing changed since version');
    // The damaged database is kept, with its log if it had one.
    const setAside = readdirSync(local).filter((name) => name.includes('.damaged-'));
    expect(setAside.filter((name) => !name.endsWith('-wal'))).toHaveLength(1);
    expect(readdirSync(home).filter((name) => name.includes('damaged'))).toEqual([]);
    await expectRestorable(home, run, source, 'restored');
  });

  it('of the embedded service beyond opening: the copy is put in its place as the service starts', async () => {
    const { run, home, source } = await backedUp('service-header');
    damageHeader(path.join(run, 'local', 'service.sqlite'));
    const listed = await runCanopy(home, ['versions', '--bucket', 'Docs'], env);
    expect(listed.status, listed.stderr).toBe(0);
    expect(listed.stderr).toMatch(
      /^canopy: the database of the backups was damaged: it is kept as /,
    );
    expect(listed.stdout).toMatch(/\sactive\s/);
    await expectRestorable(home, run, source, 'restored');
  });

  it('of the embedded service, with no copy kept: names that file, and says what to do', async () => {
    const { run, home, source } = await backedUp('service-no-copy');
    const local = path.join(run, 'local');
    rmSync(path.join(local, 'service.sqlite.copy'));
    damageTable(path.join(local, 'service.sqlite'), 'versions');

    const again = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], env);
    expect(again.status).toBe(1);
    expect(again.stderr.trimEnd().split('\n').at(-1)).toBe(
      `canopy: the database of the backups in ${local} (service.sqlite) is damaged on its disk, and Canopy has no sound copy of it to put in its place: put back a copy of that file if you keep one`,
    );
    expect(readdirSync(home).filter((name) => name.includes('damaged'))).toEqual([]);
  });
});
