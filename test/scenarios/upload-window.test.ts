import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { changeQuota } from '../../server/admin.ts';
import { deleteBucket, deleteVersion } from '../../server/store/lifecycle.ts';
import { findBucketById, type BucketRow } from '../../server/store/buckets.ts';
import { findVersion, type VersionRow } from '../../server/store/versions.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { damageStoredBlock } from '../helpers/stored-blocks.ts';
import { cidText, rawCidOf } from '../../main/protocol/index.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// A backup's upload must end within the server's upload window for its version (§10.2: 24 h
// by default; seconds here). One that nears the window's end goes on as a new version, which
// the blocks already sent count for; one that outlasts it all the same is told so, rather than
// as a device the server no longer accepts, and leaves neither a failed version nor a queued
// upload behind. So is one whose version, or bucket, is deleted on the server while it is sent.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-window-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Holds this thread (and the service in it) for `ms`, as a link too slow for the window would. */
function stall(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Four settled 1 MiB files in a folder of their own. */
function fourFiles(name: string): string {
  const source = path.join(scratch, name, 'source');
  for (let i = 0; i < 4; i += 1)
    writeSettled(path.join(source, `part-${i}.bin`), randomBytes(1 << 20));
  return source;
}

/**
 * A service with an upload window of `windowMs`, an engine logged in to it with a bucket
 * 'Slow', and `stallMs` of stall after the first shard of the first upload that `stalls` lets.
 */
async function slowBackup(
  name: string,
  windowMs: number,
  stallMs: number,
  options: {
    /** Called after each shard the service confirmed, with how many of its upload's it has. */
    readonly onConfirmed?: (confirmed: number) => void;
    /** Called after each file a backup read. */
    readonly afterFileRead?: () => void;
    readonly quotaBytes?: number;
  } = {},
): Promise<{ service: TestService; engine: Engine; stallNext: () => void }> {
  const { onConfirmed, afterFileRead, quotaBytes = null } = options;
  const service = await startTestService({ limits: DEFAULT_LIMITS, uploadWindowMs: windowMs });
  const home = path.join(scratch, name, 'home');
  let stalls = false;
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    shardTargetBytes: 1_500_000,
    afterFileRead: () => {
      afterFileRead?.();
      return Promise.resolve();
    },
    afterShardConfirmed: (confirmed) => {
      onConfirmed?.(confirmed);
      if (!stalls || confirmed !== 1) return;
      stalls = false;
      stall(stallMs);
    },
  });
  const { code } = service.addUser('ann@example.org', quotaBytes);
  await engine.login({ server: service.url, code });
  await engine.createBucket({ name: 'Slow', type: 'backup', storageClass: 'hot' });
  return { service, engine, stallNext: () => (stalls = true) };
}

/** The CID of a file of one chunk: its only leaf's. */
async function fileCid(file: string): Promise<string> {
  return cidText(await rawCidOf(readFileSync(file)));
}

/** Every version the service has made, oldest first, with its state. */
function versionsOf(service: TestService): Array<[string, string]> {
  return (
    service.service.ctx.db.prepare('SELECT id, state FROM versions ORDER BY seq').all() as Array<{
      id: string;
      state: string;
    }>
  ).map((row) => [row.id, row.state]);
}

/** `versionId` is the bucket's only version, active, and restores the four files of `source`. */
async function expectOnlyVersion(
  engine: Engine,
  versionId: string,
  source: string,
  name: string,
): Promise<void> {
  expect((await engine.listVersions({ bucket: 'Slow' })).map((v) => [v.id, v.state])).toEqual([
    [versionId, 'active'],
  ]);
  await expectRestored(engine, source, name);
}

/** The active version of 'Slow' restores the four files of `source`. */
async function expectRestored(engine: Engine, source: string, name: string): Promise<void> {
  const target = path.join(scratch, name, 'restored');
  await engine.restore({ bucket: 'Slow', to: target, overwrite: false });
  for (let i = 0; i < 4; i += 1)
    expect(
      readFileSync(path.join(target, `part-${i}.bin`)).equals(
        readFileSync(path.join(source, `part-${i}.bin`)),
      ),
    ).toBe(true);
}

/**
 * A backup of `source` into 'Slow' fails as past its upload window (`window`, as told), leaving
 * no version; the next stores all four files anew as the bucket's one active version.
 */
async function expectWindowOverThenStored(
  engine: Engine,
  source: string,
  window: string,
): Promise<void> {
  await expect(engine.backup({ dir: source, bucket: 'Slow' })).rejects.toMatchObject({
    code: 'upload_window_over',
    message: expect.stringMatching(
      new RegExp(
        `^the server takes this backup's data only within its ${window} upload window, which ended before the rest could be sent .*: run the backup again$`,
      ),
    ),
  });
  expect(await engine.listVersions({ bucket: 'Slow' })).toEqual([]);
  const next = await engine.backup({ dir: source, bucket: 'Slow' });
  expect(next).toMatchObject({ resumedVersionId: null, newBytes: 4 << 20 });
  expect((await engine.listVersions({ bucket: 'Slow' })).map((v) => v.state)).toEqual(['active']);
}

describe('the upload window', () => {
  it('an upload past its window says so and what to do, leaves no version, and the next backup completes', async () => {
    // 3 to 4 s left at the push: the first shard goes well before the window's last second,
    // and the stall after it outlasts the window.
    const { service, engine, stallNext } = await slowBackup('over', 4000, 4500);
    try {
      const source = fourFiles('over');
      stallNext();
      await expectWindowOverThenStored(engine, source, '4 s');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('an upload whose version the server dropped while its data was on the way says its window is over, not that the device is refused', async () => {
    // The server's clock jumps past the window and the failed version's retention (120 s here;
    // 7 days by default) once the first shard is in: the version is gone when the next arrives.
    let jump = (): void => undefined;
    const { service, engine } = await slowBackup('dropped', 60_000, 0, {
      onConfirmed: () => jump(),
    });
    jump = () => {
      jump = () => undefined;
      service.advance(60_000 + 120_000 + 1_000);
    };
    try {
      const source = fourFiles('dropped');
      await expectWindowOverThenStored(engine, source, '1 min');
      await expectRestored(engine, source, 'dropped');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('an upload near its window end goes on as a new version, sends no shard twice, and deletes the one left as the new one uploads', async () => {
    // The authorization's window is whole seconds from the push: 7 to 8 s left at the push, and
    // less than the margin after the stall (half the window, as going on reads nothing again,
    // and the shard on its way through the stall was slow anyway), but some.
    /** The bucket's versions' states as each upload's first shard was confirmed. */
    const atFirstShard: string[][] = [];
    let versionStates = (): string[] => [];
    let filesRead = 0;
    const { service, engine, stallNext } = await slowBackup('ending', 8000, 6000, {
      onConfirmed: (confirmed) => {
        if (confirmed === 1) atFirstShard.push(versionStates());
      },
      afterFileRead: () => {
        filesRead += 1;
      },
    });
    versionStates = () => service.versionStates();
    try {
      const source = fourFiles('ending');
      stallNext();
      const renewed = await engine.backup({ dir: source, bucket: 'Slow' });
      // The version left pending is gone as soon as the new one holds what it received: it
      // would count toward the quota all it had yet to receive.
      expect(atFirstShard).toEqual([['pending'], ['deleted', 'pending']]);
      // The new version is the same tree pushed again: no file was read twice to make it.
      expect(filesRead).toBe(4);
      expect(renewed.newBytes).toBe(4 << 20);
      // What the first version received is not sent again: every shard went once, to one
      // version or the other (each shard a MiB of data and a CAR header).
      expect(renewed.bytesUploaded).toBeGreaterThan(4 << 20);
      expect(renewed.bytesUploaded).toBeLessThan((4 << 20) + 1024);
      await expectOnlyVersion(engine, renewed.versionId, source, 'ending');
      const verified = await engine.verify({ bucket: 'Slow', all: true });
      expect(verified).toMatchObject({ total: 4, checked: 4 });
      // The file index describes the version stored: nothing is read again.
      const again = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(again).toMatchObject({ unchanged: true, versionId: renewed.versionId, bytesRead: 0 });
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('near a full quota, the upload goes on through a bridge version, and sends nothing twice', async () => {
    // Room for the four files once, not for a new version expecting them all beside what the
    // one left pending has yet to receive.
    let filesRead = 0;
    const { service, engine, stallNext } = await slowBackup('quota', 8000, 6000, {
      quotaBytes: (4 << 20) + (1 << 20),
      afterFileRead: () => {
        filesRead += 1;
      },
    });
    try {
      const source = fourFiles('quota');
      stallNext();
      const renewed = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(renewed.newBytes).toBe(4 << 20);
      expect(renewed.bytesUploaded).toBeGreaterThan(4 << 20);
      expect(renewed.bytesUploaded).toBeLessThan((4 << 20) + 1024);
      expect(filesRead).toBe(4);
      // The version left pending, the bridge and the new one: only the last is left.
      expect(service.versionStates()).toEqual(['deleted', 'deleted', 'active']);
      await expectOnlyVersion(engine, renewed.versionId, source, 'quota');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('with no room even for a bridge, the version left pending goes first, and the files are read and sent again', async () => {
    let running: TestService | undefined;
    let filesRead = 0;
    const { service, engine, stallNext } = await slowBackup('no-bridge', 8000, 6000, {
      quotaBytes: (4 << 20) + (1 << 20),
      onConfirmed: (confirmed) => {
        const ctx = running?.service.ctx;
        if (confirmed !== 1 || !ctx) return;
        running = undefined;
        // Room for one version's metadata and data, and half another metadata CAR: the bridge,
        // which needs a whole one, does not fit.
        const carBytes = ctx.db.prepare('SELECT car_bytes FROM versions').pluck().get() as number;
        changeQuota(ctx, 'ann@example.org', (4 << 20) + carBytes + Math.floor(carBytes / 2));
      },
      afterFileRead: () => {
        filesRead += 1;
      },
    });
    running = service;
    try {
      const source = fourFiles('no-bridge');
      stallNext();
      const renewed = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(renewed.newBytes).toBe(4 << 20);
      expect(filesRead).toBe(8);
      expect(service.versionStates()).toEqual(['deleted', 'active']);
      await expectOnlyVersion(engine, renewed.versionId, source, 'no-bridge');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  /**
   * A backup whose upload the first backup of 'Slow' stops right past its stall, 9 s into a
   * 12 s window: 2 to 3 s are left, time enough for the next backup to find the window ending
   * rather than over. Files read are counted; `stopNextWhileReading` stops the next one at its
   * first file read.
   */
  async function stoppedNearWindowEnd(name: string) {
    const firstStop = new AbortController();
    const secondStop = new AbortController();
    let stopWhileReading = false;
    let filesRead = 0;
    const slow = await slowBackup(name, 12_000, 9_000, {
      onConfirmed: (confirmed) => {
        if (confirmed === 1) firstStop.abort();
      },
      afterFileRead: () => {
        filesRead += 1;
        if (stopWhileReading) secondStop.abort();
      },
    });
    const states = (): Array<[string, string]> => versionsOf(slow.service);
    const source = fourFiles(name);
    slow.stallNext();
    await expect(
      slow.engine.backup({ dir: source, bucket: 'Slow', signal: firstStop.signal }),
    ).rejects.toMatchObject({ code: 'stopped' });
    return {
      ...slow,
      source,
      states,
      filesRead: () => filesRead,
      stopNextWhileReading: () => {
        stopWhileReading = true;
        return secondStop.signal;
      },
    };
  }

  it('a backup stopped near its window end is finished by the next as a new version of the same files, read no more, and the one left is deleted', async () => {
    const { service, engine, source, states, filesRead } = await stoppedNearWindowEnd('stopped');
    try {
      const [left] = states();
      expect(left?.[1]).toBe('pending');
      const next = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(states()).toEqual([
        [left?.[0], 'deleted'],
        [next.versionId, 'active'],
      ]);
      expect(next).toMatchObject({ resumedVersionId: next.versionId, bytesRead: 0 });
      expect(filesRead()).toBe(4);
      // The metadata CAR kept for the resumed upload went into the cache with it.
      expect(readdirSync(path.join(scratch, 'stopped', 'home', 'staging'))).toEqual([]);
      expect(readdirSync(path.join(scratch, 'stopped', 'home', 'metadata'))).toContain(
        `${next.versionId}.car`,
      );
      await expectOnlyVersion(engine, next.versionId, source, 'stopped');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('a version left pending by a backup stopped near its window end, then while it packed anew, is deleted by the backup that ends', async () => {
    const { service, engine, source, states, stopNextWhileReading } =
      await stoppedNearWindowEnd('repacked');
    try {
      const [left] = states();
      // As an upload queued by a Canopy that kept no metadata CAR for it: the next backup
      // packs anew, and stopped there, the version is still pending, holding what it received.
      const staging = path.join(scratch, 'repacked', 'home', 'staging');
      for (const name of readdirSync(staging)) rmSync(path.join(staging, name));
      await expect(
        engine.backup({ dir: source, bucket: 'Slow', signal: stopNextWhileReading() }),
      ).rejects.toMatchObject({ code: 'stopped' });
      expect(states()).toEqual([left]);

      const next = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(states()).toEqual([
        [left?.[0], 'deleted'],
        [next.versionId, 'active'],
      ]);
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('a version left near its window end, when another device has stored one since, gives way: the next backup builds on that version and leaves nothing pending', async () => {
    const { service, engine, source, states, filesRead } = await stoppedNearWindowEnd('other');
    const otherHome = path.join(scratch, 'other', 'other-home');
    const other = createEngine({ home: otherHome, secrets: new FileSecretStore(otherHome) });
    try {
      const [left] = states();
      expect(left?.[1]).toBe('pending');
      // The same folder, with a file of the other device's own: its version is the bucket's
      // active one now, and the one left pending builds on none, so it can no longer complete.
      await other.login({ server: service.url, code: (await engine.newEnrollmentCode()).code });
      writeSettled(path.join(source, 'theirs.txt'), 'stored by the other device');
      const theirs = await other.backup({ dir: source, bucket: 'Slow' });
      rmSync(path.join(source, 'theirs.txt'));

      const next = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(next.resumedVersionId).toBe(null);
      // Built on the other device's version: its blocks are not sent again.
      expect(next.bytesUploaded).toBeLessThan(1 << 20);
      expect(filesRead()).toBe(8);
      expect(states()).toEqual([
        [left?.[0], 'deleted'],
        [theirs.versionId, 'outdated'],
        [next.versionId, 'active'],
      ]);
      expect(readdirSync(path.join(scratch, 'other', 'home', 'staging'))).toEqual([]);
      const target = path.join(scratch, 'other', 'restored');
      await engine.restore({ bucket: 'Slow', to: target, overwrite: false });
      expect(readdirSync(target).sort()).toEqual(readdirSync(source).sort());
      for (const name of readdirSync(source))
        expect(
          readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
        ).toBe(true);
    } finally {
      await other.close();
      await engine.close();
      await service.close();
    }
  });

  it('a backup sending damaged blocks again that nears its window end sends each of them all the same', async () => {
    const { service, engine, stallNext } = await slowBackup('resend', 8000, 6000);
    try {
      const source = fourFiles('resend');
      await engine.backup({ dir: source, bucket: 'Slow' });
      // The host's copies of every file's block go bad; a verify finds them.
      const damaged = [0, 1, 2, 3].map((i) => fileCid(path.join(source, `part-${i}.bin`)));
      for (const cid of await Promise.all(damaged)) damageStoredBlock(service.dataDir, cid);
      expect((await engine.verify({ bucket: 'Slow', all: true })).unavailable).toHaveLength(4);
      // Each block goes in a shard of its own; the window nears its end after the first, with
      // the second on its way, and the upload goes on as a new version for the other two.
      stallNext();
      const healed = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(healed.blocksResent).toBe(4);
      const verified = await engine.verify({ bucket: 'Slow', all: true });
      expect(verified).toMatchObject({ unavailable: [], checked: 4 });
      // It went on as a new version, and each block went once, to one version or the other.
      expect(versionsOf(service).map(([, state]) => state)).toEqual([
        'outdated',
        'deleted',
        'active',
      ]);
      expect(healed.bytesUploaded).toBeGreaterThan(4 << 20);
      expect(healed.bytesUploaded).toBeLessThan((4 << 20) + 1024);
      await expectRestored(engine, source, 'resend');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('an upload that fails after going on as a new version is finished by the next backup, which reads no file again', async () => {
    let firstShards = 0;
    const { service, engine, stallNext } = await slowBackup('resumed', 8000, 6000, {
      onConfirmed: (confirmed) => {
        if (confirmed !== 1) return;
        firstShards += 1;
        // The new version's first shard: the process goes, as in a crash, past its stall.
        if (firstShards === 2) throw new Error('the process went away');
      },
    });
    const states = (): Array<[string, string]> => versionsOf(service);
    try {
      const source = fourFiles('resumed');
      stallNext();
      await expect(engine.backup({ dir: source, bucket: 'Slow' })).rejects.toThrow(
        'the process went away',
      );
      const [left, carried] = states();
      expect([left?.[1], carried?.[1]]).toEqual(['deleted', 'pending']);

      const next = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(next).toMatchObject({
        resumedVersionId: carried?.[0],
        versionId: carried?.[0],
        unchanged: true,
        bytesRead: 0,
      });
      await expectOnlyVersion(engine, carried?.[0] ?? '', source, 'resumed');
    } finally {
      await engine.close();
      await service.close();
    }
  });
});

describe('an upload whose version is deleted on the server meanwhile', () => {
  /**
   * A backup into 'Slow' of a service on which, once its first shard is in, `remove` deletes
   * what it is sending, as a user does from another device: its failure, then the next backup's.
   */
  async function deletedWhileSent(
    name: string,
    remove: (service: TestService, versionId: string) => void,
  ): Promise<{ failure: unknown; source: string; engine: Engine; service: TestService }> {
    let removeOnce = (): void => undefined;
    const { service, engine } = await slowBackup(name, 60_000, 0, {
      onConfirmed: () => removeOnce(),
    });
    removeOnce = () => {
      removeOnce = () => undefined;
      const [[pending] = []] = versionsOf(service).filter(([, state]) => state === 'pending');
      if (pending === undefined) throw new Error('a pending version expected');
      remove(service, pending);
    };
    const source = fourFiles(name);
    const failure = await engine.backup({ dir: source, bucket: 'Slow' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    return { failure, source, engine, service };
  }

  it('says the version was deleted, and the next backup stores it anew', async () => {
    const { failure, source, engine, service } = await deletedWhileSent('deleted', (s, id) => {
      const { ctx } = s.service;
      deleteVersion(ctx.db, findVersion(ctx.db, id) as VersionRow, ctx.policy, ctx.now());
    });
    try {
      expect(failure).toMatchObject({
        code: 'not_found',
        message: expect.stringMatching(
          /^version [0-9a-f-]{36}, which this backup was sending, was deleted on the server \(from this or another device\) before all its data arrived; what it sent is not kept: run the backup again$/,
        ),
      });
      const next = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(next).toMatchObject({ resumedVersionId: null, newBytes: 4 << 20 });
      await expectRestored(engine, source, 'deleted');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('says the bucket was deleted when it went with it', async () => {
    const { failure, engine, service } = await deletedWhileSent('bucket-deleted', (s, id) => {
      const { ctx } = s.service;
      const version = findVersion(ctx.db, id) as VersionRow;
      deleteBucket(ctx.db, findBucketById(ctx.db, version.bucket_id) as BucketRow, ctx.now());
    });
    try {
      expect(failure).toMatchObject({
        code: 'not_found',
        message:
          'the bucket this backup was sending to was deleted on the server (from this or another device) before all its data arrived; nothing of it is kept there',
      });
    } finally {
      await engine.close();
      await service.close();
    }
  });
});
