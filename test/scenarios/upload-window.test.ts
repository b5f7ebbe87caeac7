import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// A backup's upload must end within the server's upload window for its version (§10.2: 24 h
// by default; seconds here). One that nears the window's end goes on as a new version, which
// the blocks already sent count for; one that outlasts it all the same is told so, rather than
// as a device the server no longer accepts, and leaves neither a failed version nor a queued
// upload behind.

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
  const target = path.join(scratch, name, 'restored');
  await engine.restore({ bucket: 'Slow', to: target, overwrite: false });
  for (let i = 0; i < 4; i += 1)
    expect(
      readFileSync(path.join(target, `part-${i}.bin`)).equals(
        readFileSync(path.join(source, `part-${i}.bin`)),
      ),
    ).toBe(true);
}

describe('the upload window', () => {
  it('an upload past its window says so and what to do, leaves no version, and the next backup completes', async () => {
    // 3 to 4 s left at the push: the first shard goes well before the window's last second,
    // and the stall after it outlasts the window.
    const { service, engine, stallNext } = await slowBackup('over', 4000, 4500);
    try {
      const source = fourFiles('over');
      stallNext();
      await expect(engine.backup({ dir: source, bucket: 'Slow' })).rejects.toMatchObject({
        code: 'upload_window_over',
        message: expect.stringMatching(
          /^the server takes this backup's data only within its 4 s upload window, which ended before the rest could be sent .*: run the backup again$/,
        ),
      });
      expect(await engine.listVersions({ bucket: 'Slow' })).toEqual([]);
      const next = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(next).toMatchObject({ resumedVersionId: null, newBytes: 4 << 20 });
      expect((await engine.listVersions({ bucket: 'Slow' })).map((v) => v.state)).toEqual([
        'active',
      ]);
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('an upload near its window end goes on as a new version, sends no shard twice, and deletes the one left as the new one uploads', async () => {
    // The authorization's window is whole seconds from the push: 7 to 8 s left at the push, a
    // margin of 2 s, and the stall after the first shard leaves less than that, but some.
    /** The bucket's versions' states as each upload's first shard was confirmed. */
    const atFirstShard: string[][] = [];
    let versionStates = (): string[] => [];
    const { service, engine, stallNext } = await slowBackup('ending', 8000, 6000, {
      onConfirmed: (confirmed) => {
        if (confirmed === 1) atFirstShard.push(versionStates());
      },
    });
    versionStates = () =>
      (
        service.service.ctx.db.prepare('SELECT state FROM versions ORDER BY seq').all() as Array<{
          state: string;
        }>
      ).map((row) => row.state);
    try {
      const source = fourFiles('ending');
      stallNext();
      const renewed = await engine.backup({ dir: source, bucket: 'Slow' });
      // The version left pending is gone as soon as the new one holds what it received: it
      // would count toward the quota all it had yet to receive.
      expect(atFirstShard).toEqual([['pending'], ['deleted', 'pending']]);
      expect(renewed.newBytes).toBe(4 << 20);
      // The new version's own upload: what the first sent before the stall is not sent again.
      expect(renewed.bytesUploaded).toBeLessThan(3 << 20);
      await expectOnlyVersion(engine, renewed.versionId, source, 'ending');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('near a full quota, the version left pending goes before the new one is pushed, and the backup completes', async () => {
    // Room for the four files once, not for the new version beside what the one left pending
    // has yet to receive.
    const { service, engine, stallNext } = await slowBackup('quota', 8000, 6000, {
      quotaBytes: (4 << 20) + (1 << 20),
    });
    try {
      const source = fourFiles('quota');
      stallNext();
      const renewed = await engine.backup({ dir: source, bucket: 'Slow' });
      expect(renewed.newBytes).toBe(4 << 20);
      // What the first version received went with it, and was sent again.
      expect(renewed.bytesUploaded).toBeGreaterThan(4 << 20);
      await expectOnlyVersion(engine, renewed.versionId, source, 'quota');
    } finally {
      await engine.close();
      await service.close();
    }
  });

  it('a backup stopped while it packs the new version leaves the one left pending to the next backup, which deletes it', async () => {
    let stopWhileReading = false;
    const stopping = new AbortController();
    const { service, engine, stallNext } = await slowBackup('stopped', 8000, 6000, {
      onConfirmed: (confirmed) => {
        // Past the stall, the first upload goes on as a new version, read from the start.
        if (confirmed === 1) stopWhileReading = true;
      },
      afterFileRead: () => {
        if (stopWhileReading) stopping.abort();
      },
    });
    const states = (): Array<[string, string]> =>
      (
        service.service.ctx.db
          .prepare('SELECT id, state FROM versions ORDER BY seq')
          .all() as Array<{
          id: string;
          state: string;
        }>
      ).map((row) => [row.id, row.state]);
    try {
      const source = fourFiles('stopped');
      stallNext();
      await expect(
        engine.backup({ dir: source, bucket: 'Slow', signal: stopping.signal }),
      ).rejects.toMatchObject({ code: 'stopped' });
      const [left] = states();
      expect(left?.[1]).toBe('pending');

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
});
