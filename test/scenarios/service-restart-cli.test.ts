import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy, runCanopyWatched, type CliResult } from '../helpers/canopy-cli.ts';
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
// Stopped with Ctrl-C while it waits, it exits as a stopped backup does, and the next backup
// finishes its upload.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restart-'));
const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const running of servers)
    if (running.child.exitCode === null && running.child.signalCode === null)
      await stopServerProcess(running, 'SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
});
const fileStore = { CANOPY_SECRET_STORE: 'file' };
const A_YEAR_AGO = new Date(Date.now() - 365 * 86_400_000);

let server: ServerProcess;
let port: number;
const data = path.join(scratch, 'server');
const home = path.join(scratch, 'home');

beforeAll(async () => {
  server = await startServerProcess(data);
  servers.push(server);
  port = Number(new URL(server.url).port);
  const code = addUserCode(data, 'ann@example.org');
  const login = await runCanopy(home, ['login', '--server', server.url, '--code', code], fileStore);
  expect(login.status, login.stderr).toBe(0);
});

/** Starts the server again on its port, once it is down. */
async function restartServer(): Promise<void> {
  server = await startServerProcess(data, [], port);
  servers.push(server);
}

/**
 * A bucket `bucket` and a folder of three files of 1 MB to back up to it, of bytes no other
 * bucket's holds: bytes the server holds already for another bucket are not sent again, and an
 * upload with nothing to send could not be cut.
 */
async function sourceFor(bucket: string): Promise<string> {
  const created = await runCanopy(home, ['buckets', 'create', bucket], fileStore);
  expect(created.status, created.stderr).toBe(0);
  const source = path.join(scratch, bucket);
  mkdirSync(source);
  for (let i = 0; i < 3; i += 1) {
    const file = path.join(source, `${i}.bin`);
    writeFileSync(file, seededBytes(seedOf(bucket) + i, 1_000_000));
    utimesSync(file, A_YEAR_AGO, A_YEAR_AGO);
  }
  return source;
}

/** A seed of its own for each bucket name. */
function seedOf(bucket: string): number {
  return [...bucket].reduce((seed, char) => (seed * 31 + (char.codePointAt(0) ?? 0)) >>> 0, 7);
}

/** Restores bucket `bucket` into a new folder, which must hold what `source` holds. */
async function expectRestored(bucket: string, source: string): Promise<void> {
  const target = path.join(scratch, `${bucket}-restored`);
  const restore = await runCanopy(home, ['restore', '--bucket', bucket, '--to', target], fileStore);
  expect(restore.status, restore.stderr).toBe(0);
  expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
}

/**
 * `canopy backup` of `source` to `bucket`, sent at 1 MB/s so that the upload lasts long enough
 * to be cut: the server is killed as the upload starts, and `onWaiting` runs once the backup
 * says it waits.
 */
function backupCut(
  bucket: string,
  source: string,
  onWaiting: (canopy: ChildProcess) => void,
): Promise<CliResult> {
  let killed = false;
  let waited = false;
  return runCanopyWatched(
    home,
    ['backup', source, '--bucket', bucket, '--limit-upload', '1MB', '--progress'],
    fileStore,
    (stderr, canopy) => {
      if (!killed && /^uploading: /m.test(stderr)) {
        killed = true;
        server.child.kill('SIGKILL');
      }
      if (!waited && stderr.includes('; waiting for it until ')) {
        waited = true;
        onWaiting(canopy);
      }
    },
  );
}

describe('a server restarted while a backup uploads', () => {
  it('is waited for, and the backup finishes and restores', async () => {
    const source = await sourceFor('Docs');
    let restarted: Promise<void> | undefined;
    const backup = await backupCut('Docs', source, () => {
      restarted = restartServer();
    });
    expect(backup.status, backup.stderr).toBe(0);
    await restarted;
    expect(backup.stderr).toMatch(
      new RegExp(
        `^canopy: cannot reach http://127\\.0\\.0\\.1:${port} \\(.*ECONNREFUSED.*\\); waiting for it until \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\(Ctrl-C stops\\)$`,
        'm',
      ),
    );
    expect(backup.stderr).toMatch(/^canopy: reached the server again; going on$/m);
    expect(backup.stdout).toMatch(/^3 files \(0 unchanged, not read again\)/m);
    await expectRestored('Docs', source);
  });

  it('stops the backup at Ctrl-C while it waits, and the next backup finishes the upload', async () => {
    const source = await sourceFor('Stopped');
    const backup = await backupCut('Stopped', source, (canopy) => canopy.kill('SIGINT'));
    expect(backup.status, backup.stderr).toBe(130);
    expect(backup.stderr).toMatch(
      /^canopy: the backup was stopped: run it again to finish it \(what it stored stays, and only what is missing is sent\)$/m,
    );
    expect(backup.stderr).not.toMatch(/reached the server again/);
    await restartServer();
    const again = await runCanopy(home, ['backup', source, '--bucket', 'Stopped'], fileStore);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^finished the interrupted upload of version /m);
    await expectRestored('Stopped', source);
  });
});
