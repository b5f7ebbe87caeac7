import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { underFailingDisk } from '../helpers/failing-disk.ts';
import {
  addUserCode,
  startServerProcess,
  stopServerProcess,
  type ServerProcess,
} from '../helpers/server-process.ts';

// A self-hosted `canopy-server serve`, run without --log, whose data fails it: the device is
// told only that the server failed, so the server tells its operator why, on its stderr, one
// line for the problem however often the device tries again.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-problem-log-'));
const fileStore = { CANOPY_SECRET_STORE: 'file' };
const data = path.join(scratch, 'server');
const home = path.join(scratch, 'home');
let server: ServerProcess;

beforeAll(async () => {
  server = await startServerProcess(data);
  const code = addUserCode(data, 'ann@example.org');
  const login = await runCanopy(home, ['login', '--server', server.url, '--code', code], fileStore);
  expect(login.status, login.stderr).toBe(0);
  const created = await runCanopy(home, ['buckets', 'create', 'Kitchen'], fileStore);
  expect(created.status, created.stderr).toBe(0);
  const source = path.join(scratch, 'source');
  mkdirSync(source);
  writeFileSync(path.join(source, 'recipe.txt'), 'two eggs');
  const backup = await runCanopy(home, ['backup', source, '--bucket', 'Kitchen'], fileStore);
  expect(backup.status, backup.stderr).toBe(0);
});

afterAll(async () => {
  if (server.child.exitCode === null) await stopServerProcess(server, 'SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
});

describe('canopy-server serve without --log', () => {
  it("tells its operator, once, which file of its data a device's failed requests lacked", async () => {
    expect(server.stderr()).toBe('');
    // The files of the version's list are gone from the server's disk, and the device keeps
    // no copy of it.
    const chunks = path.join(data, 'metadata', 'chunks');
    const away = path.join(scratch, 'chunks-away');
    renameSync(chunks, away);
    rmSync(path.join(home, 'metadata'), { recursive: true });

    for (let attempt = 0; attempt < 2; attempt += 1) {
      const listed = await runCanopy(home, ['ls', '--bucket', 'Kitchen'], fileStore);
      expect(listed.stderr).toBe(
        "canopy: the server failed (a file of the service's data is missing from its disk, HTTP 500): tell whoever runs it (its log says why), and run this again once that is seen to\n",
      );
      expect(listed.status).toBe(1);
    }
    const told = server.stderr().split('\n').filter(Boolean);
    expect(told).toHaveLength(1);
    expect(told[0]).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z error: request failed \(GET \/api\/v1\/buckets\/metadata\/:metadata_id\/pull\): ENOENT: no such file or directory, open '([^']+)'$/,
    );
    const missing = /open '([^']+)'$/.exec(told[0] ?? '')?.[1] ?? '';
    expect(path.dirname(missing)).toBe(chunks);

    renameSync(away, chunks);
    const again = await runCanopy(home, ['ls', '--bucket', 'Kitchen'], fileStore);
    expect(again.stdout).toContain('recipe.txt');
    expect(server.stderr().split('\n').filter(Boolean)).toHaveLength(1);
  });

  it('names the pack its disk would not read during a restore', async () => {
    const [pack] = readdirSync(path.join(data, 'packs')).map((name) =>
      path.join(data, 'packs', name),
    );
    const port = new URL(server.url).port;
    await stopServerProcess(server, 'SIGTERM');
    // strace fails every read of the pack with an I/O error, as a bad sector would.
    server = await startServerProcess(
      data,
      [],
      Number(port),
      underFailingDisk('read,pread64,preadv', 'EIO', [pack ?? '']),
    );

    const target = path.join(scratch, 'restored');
    const restored = await runCanopy(
      home,
      ['restore', '--bucket', 'Kitchen', '--to', target],
      fileStore,
    );
    expect(restored.stdout).toMatch(
      /could not restore recipe\.txt: the server's disk fails to read block /,
    );
    expect(restored.status).toBe(1);
    expect(server.stderr().split('\n').filter(Boolean)).toEqual([
      expect.stringMatching(
        new RegExp(`Z error: blocks/car failed mid-answer: EIO: i/o error, read '${pack}'$`),
      ),
    ]);
  });
});
