import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type LocalService } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// kill -9 in the middle of a backup's upload, then run again: the upload resumes without
// resending any shard the host confirmed, and the restore is identical.

const here = path.dirname(fileURLToPath(import.meta.url));
const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-crash-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The embedded service, recording the shard uploads it receives. */
function recordingLocalService(
  uploads: string[],
): (dataDir: string, options: { readonly create: boolean }) => Promise<LocalService> {
  return (dataDir, options) =>
    startLocalService(dataDir, options, (app) => {
      app.addHook('onRequest', async (request) => {
        if (request.method === 'PUT' && request.url.includes('/upload/'))
          uploads.push(request.url.split('/').at(-1) ?? '');
        return Promise.resolve();
      });
    });
}

/** A source of six 1 MiB files and an enrolled home with a bucket, then a backup killed at `point`. */
async function crashedBackup(name: string, point: string) {
  const run = path.join(scratch, name);
  const source = path.join(run, 'source');
  mkdirSync(source, { recursive: true });
  for (let i = 0; i < 6; i += 1)
    writeSettled(path.join(source, `part-${i}.bin`), randomBytes(1 << 20));
  const home = path.join(run, 'home');
  const uploads: string[] = [];
  const setup = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService: recordingLocalService(uploads),
  });
  await setup.loginLocal({});
  await setup.createBucket({ name: 'Crash', type: 'backup', storageClass: 'hot' });
  await setup.close();
  const crashed = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(here, '..', 'helpers', 'crashing-backup.ts'),
      home,
      source,
      point,
    ],
    { encoding: 'utf8' },
  );
  expect(crashed.signal).toBe('SIGKILL');
  const engine = (): ReturnType<typeof createEngine> =>
    createEngine({
      home,
      secrets: new FileSecretStore(home),
      startLocalService: recordingLocalService(uploads),
    });
  return { run, source, home, uploads, engine };
}

/** Restores the bucket into `<run>/restored` and expects the six files as they are in `source`. */
async function expectRestoredAsSource(
  engine: ReturnType<typeof createEngine>,
  run: string,
  source: string,
): Promise<void> {
  const target = path.join(run, 'restored');
  await engine.restore({ bucket: 'Crash', to: target, overwrite: false });
  for (let i = 0; i < 6; i += 1) {
    expect(
      readFileSync(path.join(target, `part-${i}.bin`)).equals(
        readFileSync(path.join(source, `part-${i}.bin`)),
      ),
    ).toBe(true);
  }
}

describe('crash and resume', () => {
  it.each([
    { point: 'read:3', confirmedAtCrash: null },
    { point: 'shard:0', confirmedAtCrash: 0 },
    { point: 'shard:2', confirmedAtCrash: 2 },
  ])(
    'killed at $point, the next run completes without resending a confirmed shard',
    async ({ point, confirmedAtCrash }) => {
      const {
        run,
        source,
        home,
        uploads,
        engine: openEngine,
      } = await crashedBackup(point.replace(':', '-'), point);
      const state = new Database(path.join(home, 'state.sqlite'), { readonly: true });
      const confirmed = state
        .prepare<[], { shard_cid: string }>(
          'SELECT shard_cid FROM upload_shards WHERE confirmed = 1',
        )
        .all()
        .map((row) => row.shard_cid);
      const queued =
        state.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM upload_shards').get()?.n ?? 0;
      const plans =
        state.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM shard_plans').get()?.n ?? 0;
      state.close();
      if (confirmedAtCrash === null) {
        // Killed while packing: nothing was pushed, and no shard was staged. The metadata CAR
        // being written is left behind, a file, for the next run to remove (checked below).
        expect(queued).toBe(0);
        // The plan of its shards is left too, rows the next backup to the bucket drops.
        expect(plans).toBe(1);
        for (const left of stagedLeftovers(home))
          expect(statSync(path.join(home, 'staging', left)).isFile()).toBe(true);
      } else {
        expect(confirmed).toHaveLength(confirmedAtCrash);
        expect(queued).toBeGreaterThan(confirmedAtCrash);
        // Recorded with the upload, the plan went in the same transaction.
        expect(plans).toBe(0);
      }

      const engine = openEngine();
      try {
        const result = await engine.backup({ dir: source, bucket: 'Crash' });
        if (confirmedAtCrash === null) {
          expect(result.resumedVersionId).toBeNull();
          expect(result.newBytes).toBe(6 << 20);
        } else {
          expect(result.resumedVersionId).toEqual(expect.any(String));
          // The source did not change after the crash: the finished version is its backup,
          // and no second version duplicates it. The files the killed run read are known as
          // that version's, and not read again.
          expect(result).toMatchObject({
            unchanged: true,
            versionId: result.resumedVersionId,
            newBytes: 0,
            filesUnchanged: 6,
            bytesRead: 0,
          });
          expect((await engine.listVersions({ bucket: 'Crash' })).map((v) => v.state)).toEqual([
            'active',
          ]);
          expect(uploads).toHaveLength(queued - confirmedAtCrash);
          // It says what finishing the upload sent: a shard of one 1 MiB file each.
          expect(result.bytesUploaded).toBeGreaterThan(uploads.length << 20);
          expect(result.bytesUploaded).toBeLessThan((uploads.length << 20) + 1024 * uploads.length);
        }
        for (const shard of confirmed) expect(uploads).not.toContain(shard);
        expect(stagedLeftovers(home)).toEqual([]);
        // The finished upload leaves no plan behind in the state database.
        const after = new Database(path.join(home, 'state.sqlite'), { readonly: true });
        const left = [
          'uploads',
          'upload_shards',
          'upload_blocks',
          'shard_plans',
          'planned_blocks',
        ].map(
          (table) =>
            after.prepare<[], { n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).get()?.n,
        );
        after.close();
        expect(left).toEqual([0, 0, 0, 0, 0]);
        // Another run finds the same source, from the index alone: no new version.
        expect(await engine.backup({ dir: source, bucket: 'Crash' })).toMatchObject({
          unchanged: true,
          versionId: result.versionId,
          bytesRead: 0,
        });
        expect(await engine.listVersions({ bucket: 'Crash' })).toHaveLength(1);
        await expectRestoredAsSource(engine, run, source);
      } finally {
        await engine.close();
      }
    },
  );

  it('killed after two shards, then a file changes: the next run drops that upload and backs up afresh', async () => {
    const {
      run,
      source,
      engine: openEngine,
    } = await crashedBackup('changed-after-crash', 'shard:2');
    // The last file's shard was not sent yet; its content is no longer what was packed.
    writeFileSync(path.join(source, 'part-5.bin'), randomBytes(1 << 20));

    const engine = openEngine();
    try {
      const result = await engine.backup({ dir: source, bucket: 'Crash' });
      expect(result.resumedVersionId).toBeNull();
      expect((await engine.listVersions({ bucket: 'Crash' })).map((v) => v.state)).toEqual([
        'active',
      ]);
      await expectRestoredAsSource(engine, run, source);
    } finally {
      await engine.close();
    }
  });
});
