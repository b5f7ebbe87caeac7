import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy, runCanopyWatched } from '../helpers/canopy-cli.ts';
import { seededBytes } from '../helpers/seeded-random.ts';
import {
  addUserCode,
  startServerProcess,
  stopServerProcess,
  type ServerProcess,
} from '../helpers/server-process.ts';
import { fingerprintTree } from '../helpers/tree-fingerprint.ts';

// `canopy backup` to a server that is killed part way through the upload and started again (an
// update, a reboot of the machine it runs on): the backup says it waits for the server, until
// when, and that it reached it again, and then finishes; the restore is the folder backed up.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restart-'));
const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const server of servers)
    if (server.child.exitCode === null && server.child.signalCode === null)
      await stopServerProcess(server, 'SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
});
const fileStore = { CANOPY_SECRET_STORE: 'file' };
const A_YEAR_AGO = new Date(Date.now() - 365 * 86_400_000);

describe('a server restarted while a backup uploads', () => {
  it('is waited for, and the backup finishes and restores', async () => {
    const data = path.join(scratch, 'server');
    const first = await startServerProcess(data);
    servers.push(first);
    const port = Number(new URL(first.url).port);
    const home = path.join(scratch, 'home');
    const code = addUserCode(data, 'ann@example.org');
    for (const args of [
      ['login', '--server', first.url, '--code', code],
      ['buckets', 'create', 'Docs'],
    ]) {
      const run = await runCanopy(home, args, fileStore);
      expect(run.status, run.stderr).toBe(0);
    }
    const source = path.join(scratch, 'source');
    mkdirSync(source);
    for (let i = 0; i < 3; i += 1) {
      const file = path.join(source, `${i}.bin`);
      writeFileSync(file, seededBytes(i, 1_000_000));
      utimesSync(file, A_YEAR_AGO, A_YEAR_AGO);
    }

    let killed = false;
    let restarted: Promise<ServerProcess> | undefined;
    // Sent at 1 MB/s, so that the upload lasts long enough to be cut.
    const backup = await runCanopyWatched(
      home,
      ['backup', source, '--bucket', 'Docs', '--limit-upload', '1MB', '--progress'],
      fileStore,
      (stderr) => {
        if (!killed && /^uploading: /m.test(stderr)) {
          killed = true;
          first.child.kill('SIGKILL');
        }
        if (restarted === undefined && stderr.includes('; waiting for it until ')) {
          restarted = startServerProcess(data, [], port);
          void restarted.then((server) => servers.push(server));
        }
      },
    );
    expect(backup.status, backup.stderr).toBe(0);
    expect(killed).toBe(true);
    await restarted;
    expect(backup.stderr).toMatch(
      new RegExp(
        `^canopy: cannot reach http://127\\.0\\.0\\.1:${port} \\(.*ECONNREFUSED.*\\); waiting for it until \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\(Ctrl-C stops\\)$`,
        'm',
      ),
    );
    expect(backup.stderr).toMatch(/^canopy: reached the server again; going on$/m);
    expect(backup.stdout).toMatch(/^3 files \(0 unchanged, not read again\)/m);

    const target = path.join(scratch, 'restored');
    const restore = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--to', target],
      fileStore,
    );
    expect(restore.status, restore.stderr).toBe(0);
    expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
  });
});
