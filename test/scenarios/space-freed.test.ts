import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  canopyFails,
  canopySucceeds as canopy,
  loginWithBucket,
  runCanopy,
} from '../helpers/canopy-cli.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { BackupLock } from '../../main/state/index.ts';
import { bucketKeyAccountOf, cachedCarsOf, keptRowsOf } from '../helpers/kept-state.ts';
import { storedDataBytes } from '../helpers/stored-blocks.ts';
import { fingerprintTree } from '../helpers/tree-fingerprint.ts';

// Each `canopy` command runs the embedded service for as long as it runs, so the service's
// periodic sweep never comes round. What a command deletes (a bucket, versions pruned or
// expired) must still leave the disk: the command frees it as it ends.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-space-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A home logged in to its own embedded service with a bucket; its data and a source folder. */
async function loggedIn(name: string, bucket: string, type: 'backup' | 'interactive') {
  const home = path.join(scratch, `${name}-home`);
  const data = path.join(scratch, `${name}-data`);
  const source = path.join(scratch, `${name}-source`);
  mkdirSync(source);
  await loginWithBucket(home, data, bucket, type);
  return { home, data, source };
}

describe('space freed by the command line', () => {
  it("frees all of a deleted bucket's blocks, more than one batch of them, and its rows' room", async () => {
    const { home, data, source } = await loggedIn('bucket', 'Notes', 'backup');
    // More blocks than the service deletes in one batch (10 000).
    const files = 10_500;
    for (let folder = 0; folder < files / 500; folder += 1) {
      mkdirSync(path.join(source, `f${folder}`), { recursive: true });
      for (let file = 0; file < 500; file += 1)
        writeFileSync(path.join(source, `f${folder}`, `${file}.txt`), `${folder}/${file}\n`);
    }
    await canopy(home, 'backup', source, '--bucket', 'Notes', '--skip-check');
    expect(storedDataBytes(data)).toBeGreaterThan(60_000);
    const database = path.join(data, 'service.sqlite');
    const databaseBefore = statSync(database).size;
    expect(databaseBefore).toBeGreaterThan(2_000_000);

    await canopy(home, 'buckets', 'delete', 'Notes', '--yes');
    expect(storedDataBytes(data)).toBe(0);
    // The rows' pages went back to the disk too, and the kept copy is made from what is left.
    expect(statSync(database).size).toBeLessThan(databaseBefore / 4);
    expect(statSync(`${database}.copy`).size).toBeLessThan(databaseBefore / 4);
  });

  it('rewrites the packs that versions pruned left mostly empty, and the rest restores', async () => {
    // An interactive bucket keeps 5 outdated versions besides the active one; older ones go.
    const { home, data, source } = await loggedIn('pruned', 'Work', 'interactive');
    writeFileSync(path.join(source, 'kept.bin'), randomBytes(1_000_000));
    writeFileSync(path.join(source, 'dropped.bin'), randomBytes(3_000_000));
    await canopy(home, 'backup', source, '--bucket', 'Work', '--skip-check');
    // Both files are in one pack; the first version is the only one holding dropped.bin.
    rmSync(path.join(source, 'dropped.bin'));
    for (let edit = 1; edit <= 5; edit += 1) {
      writeFileSync(path.join(source, 'counter.txt'), `${edit}\n`);
      await canopy(home, 'backup', source, '--bucket', 'Work', '--skip-check');
    }
    expect(storedDataBytes(data)).toBeGreaterThan(4_000_000);

    writeFileSync(path.join(source, 'counter.txt'), 'last\n');
    await canopy(home, 'backup', source, '--bucket', 'Work', '--skip-check');
    // The first version was pruned: its pack, a quarter live, is rewritten with kept.bin alone.
    expect(storedDataBytes(data)).toBeLessThan(1_100_000);
    const restored = path.join(scratch, 'pruned-restored');
    await canopy(home, 'restore', '--bucket', 'Work', '--to', restored);
    expect(fingerprintTree(restored)).toEqual(fingerprintTree(source));
  });

  it('says on stderr when a pack it would rewrite cannot be read, and the command succeeds', async () => {
    const { home, data, source } = await loggedIn('damaged', 'Disk', 'backup');
    writeFileSync(path.join(source, 'kept.bin'), randomBytes(100_000));
    writeFileSync(path.join(source, 'dropped.bin'), randomBytes(300_000));
    await canopy(home, 'backup', source, '--bucket', 'Disk', '--skip-check');
    rmSync(path.join(source, 'dropped.bin'));
    await canopy(home, 'backup', source, '--bucket', 'Disk', '--skip-check');
    const versions = JSON.parse(
      await canopy(home, 'versions', '--bucket', 'Disk', '--json'),
    ) as Array<{ id: string }>;
    const first = versions.at(-1)?.id ?? '';
    // The pack both files went to, cut short on a failing disk.
    const [pack] = readdirSync(path.join(data, 'packs')).filter(
      (name) => statSync(path.join(data, 'packs', name)).size >= 400_000,
    );
    if (pack === undefined) throw new Error('no pack of both files');
    truncateSync(path.join(data, 'packs', pack), 1000);

    const deleted = await runCanopy(home, ['versions', 'delete', first, '--bucket', 'Disk'], {
      CANOPY_SECRET_STORE: 'file',
    });
    expect(deleted.status, deleted.stderr).toBe(0);
    expect(deleted.stdout).toContain(`deleted version ${first}`);
    expect(deleted.stderr).toMatch(
      new RegExp(
        `^canopy: the local service could not compact packs, and tries again at the next command: could not compact 1 pack\\(s\\), left as they are \\(${pack.replace('.pack', '')}: `,
      ),
    );
    expect(deleted.stderr).not.toContain('Warning');
  });

  it('forgets what this device kept of a deleted bucket, and refuses while a backup to it runs', async () => {
    const { home, source } = await loggedIn('forgotten', 'Gone', 'backup');
    for (let file = 0; file < 20; file += 1)
      writeFileSync(path.join(source, `${file}.txt`), `file ${file}\n`);
    await canopy(home, 'backup', source, '--bucket', 'Gone', '--skip-check');
    writeFileSync(path.join(source, 'more.txt'), 'more\n');
    await canopy(home, 'backup', source, '--bucket', 'Gone', '--skip-check');
    // Listed once, so kept for when the service cannot be reached.
    await canopy(home, 'versions', '--bucket', 'Gone');
    const [bucket] = JSON.parse(await canopy(home, 'buckets', '--json')) as Array<{ id: string }>;
    const bucketId = bucket?.id ?? '';
    const cachedCars = () => cachedCarsOf(home);
    const keptRows = () => keptRowsOf(home, bucketId);
    const keyAccount = bucketKeyAccountOf(home, bucketId);
    if (keyAccount === null) throw new Error('the bucket was created here, with its key');
    expect(await new FileSecretStore(home).get(keyAccount)).not.toBeNull();
    expect(cachedCars()).toHaveLength(2);
    expect(keptRows()).toEqual({ buckets: 1, fileIndex: 1, versions: 1, active: 1 });

    const backupRunning = BackupLock.tryAcquire(home, bucketId);
    try {
      expect(await canopyFails(home, 'buckets', 'delete', 'Gone', '--yes')).toContain(
        'a backup to bucket "Gone" is running',
      );
    } finally {
      backupRunning?.release();
    }
    expect(await canopy(home, 'buckets')).toContain('Gone');

    await canopy(home, 'buckets', 'delete', 'Gone', '--yes');
    expect(cachedCars()).toEqual([]);
    expect(keptRows()).toEqual({ buckets: 0, fileIndex: 0, versions: 0, active: 0 });
    expect(await new FileSecretStore(home).get(keyAccount)).toBeNull();
  });
});
