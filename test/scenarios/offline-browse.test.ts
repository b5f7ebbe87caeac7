import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { damageNodeOf } from '../helpers/damaged-node.ts';
import {
  runServerCommand,
  startServerProcess,
  stopServerProcess,
} from '../helpers/server-process.ts';

// A version's tree comes from the local metadata cache: once the server is gone, `canopy ls`
// still lists the last active version (and says so), a named version (or the start of its id)
// needs no server at all (and another bucket's version is refused, online or not, though the
// cache holds it; a bucket renamed here is found by its new name), `canopy diff` compares the
// last two versions, `whoami` tells the account this device enrolled with, and what does need
// the server fails with one clear line.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-offline-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('browsing while the server is unreachable', () => {
  it('lists the last known version from the cache; restore says the server is unreachable', async () => {
    const serverData = path.join(scratch, 'server');
    const server = await startServerProcess(serverData);
    const home = path.join(scratch, 'home');
    const source = path.join(scratch, 'source');
    mkdirSync(path.join(source, 'letters'), { recursive: true });
    writeFileSync(path.join(source, 'letters', 'to-ann.txt'), 'Dear Ann');
    writeFileSync(path.join(source, 'todo.txt'), 'water the plants');
    let online: string;
    let versionId: string;
    let versionOne: string;
    try {
      const added = runServerCommand(
        ['user', 'add', '--email', 'ann@example.org'].concat(['--data', serverData, '--json']),
      );
      const code = (JSON.parse(added.stdout) as { code: string }).code;
      expect(
        (await runCanopy(home, ['login', '--server', server.url, '--code', code])).status,
      ).toBe(0);
      for (const bucket of ['Home', 'Work'])
        await runCanopy(home, ['buckets', 'create', bucket, '--type', 'backup', '--class', 'hot']);
      const backup = await runCanopy(home, ['backup', source, '--bucket', 'Home', '--json']);
      expect(backup.status).toBe(0);
      versionId = (JSON.parse(backup.stdout) as { versionId: string }).versionId;
      const listed = await runCanopy(home, ['ls', '--bucket', 'Home']);
      expect(listed.stderr).toBe('');
      online = listed.stdout;
      expect(online).toContain('letters');
      expect(online).toContain('todo.txt');
      const elsewhere = await runCanopy(home, ['ls', '--bucket', 'Work', '--version', versionId]);
      expect(elsewhere).toMatchObject({ status: 1, stdout: '' });
      expect(elsewhere.stderr).toContain(`bucket "Work" has no version ${versionId}`);
      // Renamed here: it is browsed by its new name once the server is gone.
      const renamed = await runCanopy(home, ['buckets', 'rename', 'Home', 'House']);
      expect(renamed.status, renamed.stderr).toBe(0);
      // A second version, and nothing asked of the server after it: the backup itself records
      // the versions, for `canopy versions` and the start of an id to name it offline. (The
      // letter is written in place: the top folder lists the same.)
      versionOne = versionId;
      writeFileSync(path.join(source, 'letters', 'to-ann.txt'), 'Dear Ann, again');
      const second = await runCanopy(home, [
        'backup',
        source,
        '--bucket',
        'House',
        '--skip-check',
        '--json',
      ]);
      expect(second.status, second.stderr).toBe(0);
      versionId = (JSON.parse(second.stdout) as { versionId: string }).versionId;
    } finally {
      await stopServerProcess(server, 'SIGTERM');
    }

    const versions = await runCanopy(home, ['versions', '--bucket', 'House']);
    expect(versions.status, versions.stderr).toBe(0);
    expect(versions.stdout).toMatch(new RegExp(`^${versionId}\\s+active\\s`, 'm'));
    expect(versions.stdout).toMatch(new RegExp(`^${versionOne}\\s+outdated\\s`, 'm'));
    const oldName = await runCanopy(home, ['ls', '--bucket', 'Home']);
    expect(oldName).toMatchObject({ status: 1, stdout: '' });
    const offline = await runCanopy(home, ['ls', '--bucket', 'House']);
    expect(offline.status).toBe(0);
    expect(offline.stdout).toBe(online);
    expect(offline.stderr).toMatch(
      new RegExp(
        `^canopy: the server cannot be reached; showing version ${versionId}, the active one as of \\d{4}-`,
      ),
    );
    // The account this device enrolled with, said to be as it enrolled: no storage host.
    const who = await runCanopy(home, ['whoami', '--json']);
    expect(who.status, who.stderr).toBe(0);
    expect(JSON.parse(who.stdout)).toMatchObject({
      mode: 'remote',
      server: server.url,
      email: 'ann@example.org',
      storageHost: null,
      offlineBecause: 'network',
    });
    expect(who.stderr).toBe(
      'canopy: the server cannot be reached; showing the account as this device enrolled it\n',
    );
    const named = await runCanopy(home, [
      'ls',
      '--bucket',
      'House',
      '--version',
      versionId,
      'letters',
    ]);
    expect(named).toMatchObject({ status: 0, stderr: '' });
    expect(named.stdout).toContain('to-ann.txt');
    // The start of its id is enough, known from the versions as last listed.
    const started = await runCanopy(home, [
      'ls',
      '--bucket',
      'House',
      '--version',
      versionId.slice(0, 8),
      'letters',
    ]);
    expect(started).toMatchObject({ status: 0, stderr: '', stdout: named.stdout });
    const elsewhere = await runCanopy(home, ['ls', '--bucket', 'Work', '--version', versionId]);
    expect(elsewhere).toMatchObject({
      status: 1,
      stdout: '',
      stderr: `canopy: bucket "Work" has no version ${versionId} (it is a version of bucket "House")\n`,
    });

    // What changed between the two, from the cache and the versions as last listed.
    const compared = await runCanopy(home, ['diff', '--bucket', 'House']);
    expect(compared.status, compared.stderr).toBe(0);
    expect(compared.stdout.split('\n').slice(1, -2)).toEqual(['M letters/to-ann.txt']);
    expect(compared.stderr).toMatch(
      /^canopy: the server cannot be reached; comparing the versions as of \d{4}-/,
    );

    const restore = await runCanopy(home, [
      'restore',
      '--bucket',
      'House',
      '--to',
      path.join(scratch, 'out'),
    ]);
    expect(restore.status).toBe(1);
    expect(restore.stderr.split('\n').filter((line) => line !== '')).toHaveLength(1);
    expect(restore.stderr).toMatch(/^canopy: .*(reach|connect)/);
    // For a script, the same as one JSON line, saying that a later run may succeed.
    const scripted = await runCanopy(home, ['restore', '--bucket', 'House', '--json']);
    expect(scripted).toMatchObject({ status: 1, stdout: '' });
    expect(JSON.parse(scripted.stderr)).toEqual({
      error: {
        code: 'network',
        message: restore.stderr.slice('canopy: '.length, -1),
        retryable: true,
      },
    });

    // A kept copy found damaged on this disk cannot be fetched again while the server is gone:
    // the one line says both, with the code of the server not reached (a later run may do).
    const damage = (versionShown: string) =>
      `cannot reach ${server.url} \\(.*\\), so version ${versionShown} cannot be fetched again in place of the copy this computer keeps, found damaged \\(the metadata in .*${versionShown}\\.car is damaged: node \\w+ does not match its CID\\)`;
    await damageNodeOf(path.join(home, 'metadata', `${versionOne}.car`));
    const damagedNamed = await runCanopy(home, [
      'ls',
      '--bucket',
      'House',
      '--version',
      versionOne,
    ]);
    expect(damagedNamed).toMatchObject({ status: 1, stdout: '' });
    expect(damagedNamed.stderr).toMatch(new RegExp(`^canopy: ${damage(versionOne)}\\n$`));
    await damageNodeOf(path.join(home, 'metadata', `${versionId}.car`));
    const damagedActive = await runCanopy(home, ['ls', '--bucket', 'House', '--json']);
    expect(damagedActive).toMatchObject({ status: 1, stdout: '' });
    expect(JSON.parse(damagedActive.stderr)).toEqual({
      error: {
        code: 'network',
        message: expect.stringMatching(new RegExp(`^${damage(versionId)}$`)),
        retryable: true,
      },
    });
  });
});
