import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { BackupLock } from '../../main/state/index.ts';
import { createEngine } from '../../main/index.ts';
import { DEFAULT_LIMITS, type Snapshot } from '../../main/protocol/index.ts';
import {
  canopyFails,
  canopySucceeds as canopy,
  localHomeWithBucket,
  versionsListed,
} from '../helpers/canopy-cli.ts';
import { runHelper } from '../helpers/helper-process.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { storedDataBytes } from '../helpers/stored-blocks.ts';
import { startTestService } from '../helpers/test-service.ts';
import { fingerprintTree } from '../helpers/tree-fingerprint.ts';

// A user frees room by deleting versions they no longer want, from the command line: the data
// only those versions held leaves the disk, the versions left restore as they were, and the
// next backup sends again whatever a deleted version alone held.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-deletion-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const MB = 1_000_000;

/** A home logged in to its own embedded service, with a backup bucket named `bucket`. */
function loggedIn(name: string, bucket: string) {
  return localHomeWithBucket(path.join(scratch, name), bucket);
}

describe('deleting versions', () => {
  it("frees old and latest versions' own data, and the latest's place goes to the one before", async () => {
    const { run, home, data, source } = await loggedIn('three', 'Photos');
    writeSettled(path.join(source, 'kept.txt'), 'in every version\n');
    // Each version holds a photo of its own, 2 MB, besides the file all share.
    for (const photo of ['first', 'second', 'third']) {
      rmSync(path.join(source, 'photo.bin'), { force: true });
      writeSettled(path.join(source, 'photo.bin'), randomBytes(2 * MB));
      await canopy(home, 'backup', source, '--bucket', 'Photos', '--skip-check');
      if (photo === 'second')
        await canopy(home, 'restore', '--bucket', 'Photos', '--to', path.join(run, 'second'));
    }
    const [third, second, first] = (await versionsListed(home, 'Photos')).map(
      (version) => version.id,
    );
    if (first === undefined || second === undefined || third === undefined)
      throw new Error('three versions expected');
    const before = storedDataBytes(data);

    // The oldest, and the latest, in one command: the first by the start of its id.
    const said = await canopy(
      home,
      'versions',
      'delete',
      first.slice(0, 8),
      third,
      '--bucket',
      'Photos',
    );
    expect(said).toMatch(
      new RegExp(
        `^deleted version ${first} and its snapshot \\S+; .*\ndeleted version ${third} and its snapshot \\S+; .*\nthe active version of bucket "Photos" is ${second}\n$`,
      ),
    );
    // Each photo only its version held.
    expect(before - storedDataBytes(data)).toBeGreaterThanOrEqual(4 * MB);
    expect(await versionsListed(home, 'Photos')).toMatchObject([{ id: second, state: 'active' }]);
    const snapshots = JSON.parse(
      await canopy(home, 'snapshots', '--bucket', 'Photos', '--json'),
    ) as Snapshot[];
    expect(snapshots.map((snapshot) => snapshot.metadata_id)).toEqual([second]);
    // The bucket's latest is now the second version, photo and all.
    const restored = path.join(run, 'after-delete');
    await canopy(home, 'restore', '--bucket', 'Photos', '--to', restored);
    expect(fingerprintTree(restored)).toEqual(fingerprintTree(path.join(run, 'second')));

    // The third photo is unchanged on disk, but only the deleted version held its data.
    const again = await canopy(home, 'backup', source, '--bucket', 'Photos', '--skip-check');
    expect(again).toContain('2.0 MB new');
    const latest = path.join(run, 'latest');
    await canopy(home, 'restore', '--bucket', 'Photos', '--to', latest);
    expect(fingerprintTree(latest)).toEqual(fingerprintTree(source));
  });

  it('deletes a snapshot alone: its version stays, unpinned', async () => {
    const { home, source } = await loggedIn('snapshot', 'Notes');
    writeSettled(path.join(source, 'note.txt'), 'a note\n');
    await canopy(home, 'backup', source, '--bucket', 'Notes', '--skip-check');
    const [version] = await versionsListed(home, 'Notes');
    if (version?.snapshot_id == null) throw new Error('a backup version has a snapshot');

    // Named by the start of its id, as a user types it.
    const said = await canopy(
      home,
      'snapshots',
      'delete',
      version.snapshot_id.slice(0, 8),
      '--bucket',
      'Notes',
    );
    expect(said).toContain(`deleted snapshot ${version.snapshot_id}; version ${version.id} stays`);
    expect(await versionsListed(home, 'Notes')).toMatchObject([
      { id: version.id, state: 'active', snapshot_id: null },
    ]);
    expect(await canopy(home, 'snapshots', '--bucket', 'Notes')).toContain('no snapshots yet');
  });

  it('says so for a version or snapshot the bucket does not have, and refuses one still uploading', async () => {
    const { home, source } = await loggedIn('refused', 'Crash');
    for (let part = 0; part < 3; part += 1)
      writeSettled(path.join(source, `part-${part}.bin`), randomBytes(1 << 20));
    expect(
      await canopyFails(home, 'versions', 'delete', 'no-such-version', '--bucket', 'Crash'),
    ).toContain('bucket "Crash" has no version no-such-version');
    expect(
      await canopyFails(home, 'snapshots', 'delete', 'no-such-snapshot', '--bucket', 'Crash'),
    ).toContain('bucket "Crash" has no snapshot no-such-snapshot');

    // A backup killed once its version was pushed, before any data went.
    const crashed = await runHelper('crashing-backup', [home, source, 'shard:0']).exited;
    expect(crashed.signal).toBe('SIGKILL');
    const [pending] = await versionsListed(home, 'Crash');
    expect(pending?.state).toBe('pending');
    expect(
      await canopyFails(home, 'versions', 'delete', pending?.id ?? '', '--bucket', 'Crash'),
    ).toContain('is still being uploaded: run the backup again to finish it');
    // Nor is any while a backup to the bucket runs.
    const [bucket] = JSON.parse(await canopy(home, 'buckets', '--json')) as Array<{ id: string }>;
    const backupRunning = BackupLock.tryAcquire(home, bucket?.id ?? '');
    try {
      expect(
        await canopyFails(home, 'versions', 'delete', pending?.id ?? '', '--bucket', 'Crash'),
      ).toContain(
        'a backup to bucket "Crash" is running; stop it or wait for it to finish, then delete the version',
      );
    } finally {
      backupRunning?.release();
    }
    // Nothing was lost to the refusals: the next backup finishes that very upload.
    const finished = await canopy(home, 'backup', source, '--bucket', 'Crash', '--skip-check');
    expect(finished).toContain(`finished the interrupted upload of version ${pending?.id ?? ''}`);
  });
});

describe('deleting versions on a server that keeps no unpinned outdated version', () => {
  it('deletes a version the server prunes as soon as its snapshot goes', async () => {
    const service = await startTestService({ limits: DEFAULT_LIMITS, outdatedVersionsKept: 0 });
    const home = path.join(scratch, 'pruning', 'home');
    const source = path.join(scratch, 'pruning', 'source');
    mkdirSync(source, { recursive: true });
    const engine = createEngine({ home, secrets: new FileSecretStore(home) });
    try {
      const { code } = service.addUser('ann@example.org');
      await engine.login({ server: service.url, code });
      await engine.createBucket({ name: 'Pruned', type: 'backup', storageClass: 'hot' });
      writeSettled(path.join(source, 'a.txt'), 'first\n');
      const { versionId: first } = await engine.backup({ dir: source, bucket: 'Pruned' });
      writeSettled(path.join(source, 'a.txt'), 'second\n');
      const { versionId: second } = await engine.backup({ dir: source, bucket: 'Pruned' });

      await expect(
        engine.deleteVersion({ bucket: 'Pruned', version: first }),
      ).resolves.toMatchObject({ versionId: first, activeVersionId: second });
      expect((await engine.listVersions({ bucket: 'Pruned' })).map((v) => v.id)).toEqual([second]);
    } finally {
      await engine.close();
      await service.close();
    }
  });
});
