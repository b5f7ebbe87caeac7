import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { RestoreMark } from '../../main/state/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// Two Canopy processes on one home and one local backup folder at once, as when a user runs a
// command in a terminal while a backup is running: each starts its own embedded service on the
// folder. The second backup to a bucket is refused clearly, and other commands work beside it
// without disturbing the running upload; backups to two buckets run side by side.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-concurrent-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A backup stopped at its first file read: `firstFileRead` once it is there; `resume` lets it go. */
interface PausedBackup {
  readonly firstFileRead: Promise<void>;
  readonly resume: () => void;
}

/** An engine on `home` whose backups stop at their first file read once `pause` is called. */
function pausingEngine(home: string): { engine: Engine; pause: () => PausedBackup } {
  let gate: { reached: () => void; resumed: Promise<void> } | undefined;
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    afterFileRead: async () => {
      if (!gate) return;
      gate.reached();
      await gate.resumed;
    },
  });
  const pause = (): PausedBackup => {
    let reached: () => void = () => undefined;
    const firstFileRead = new Promise<void>((resolve) => (reached = resolve));
    let release: () => void = () => undefined;
    const resumed = new Promise<void>((resolve) => (release = resolve));
    gate = { reached, resumed };
    return {
      firstFileRead,
      resume: () => {
        gate = undefined;
        release();
      },
    };
  };
  return { engine, pause };
}

describe('concurrent commands', () => {
  it('refuses a second backup to a bucket while one runs, and lets other commands run beside it', async () => {
    const source = path.join(scratch, 'source');
    mkdirSync(path.join(source, 'photos'), { recursive: true });
    for (let i = 0; i < 6; i += 1)
      writeFileSync(path.join(source, 'photos', `p${i}.jpg`), randomBytes(3 << 20));
    writeFileSync(path.join(source, 'notes.txt'), 'notes');
    const home = path.join(scratch, 'home');
    const env = { CANOPY_SECRET_STORE: 'file' };

    // The running backup stops after its first file until the other commands are done.
    const { engine, pause } = pausingEngine(home);
    const { firstFileRead, resume } = pause();
    try {
      await engine.loginLocal({ dataDir: path.join(scratch, 'backup-disk') });
      await engine.createBucket({ name: 'Photos', type: 'backup', storageClass: 'hot' });
      const running = engine.backup({ dir: source, bucket: 'Photos' });
      await firstFileRead;

      const second = await runCanopy(home, ['backup', source, '--bucket', 'Photos'], env);
      expect(second.stderr).toBe(
        'canopy: another backup to bucket "Photos" is running; wait for it to finish\n',
      );
      expect(second.status).toBe(1);
      const versions = await runCanopy(home, ['versions', '--bucket', 'Photos'], env);
      expect(versions.stdout).toBe('no versions yet\n');
      expect(versions.status).toBe(0);

      resume();
      const first = await running;
      expect(first).toMatchObject({ files: 7, skipped: [] });
      const target = path.join(scratch, 'restored');
      const restored = await runCanopy(
        home,
        ['restore', '--bucket', 'Photos', '--to', target],
        env,
      );
      expect(restored.status).toBe(0);
      for (let i = 0; i < 6; i += 1) {
        const name = path.join('photos', `p${i}.jpg`);
        expect(
          readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
        ).toBe(true);
      }
      // Once the first is done, the lock is free again: the next backup runs and finds nothing new.
      const again = await runCanopy(home, ['backup', source, '--bucket', 'Photos', '--json'], env);
      expect(again.stderr).toBe('');
      expect(JSON.parse(again.stdout)).toMatchObject({
        versionId: first.versionId,
        unchanged: true,
      });
    } finally {
      resume();
      await engine.close();
    }
  });

  it('never backs up a folder while a restore writes into it, nor restores into one while it is backed up', async () => {
    const source = path.join(scratch, 'restored-into');
    mkdirSync(path.join(source, 'photos'), { recursive: true });
    for (let i = 0; i < 6; i += 1)
      writeSettled(path.join(source, 'photos', `p${i}.jpg`), randomBytes(3 << 20));
    const elsewhere = path.join(scratch, 'elsewhere');
    writeSettled(path.join(elsewhere, 'list.txt'), 'milk');
    const home = path.join(scratch, 'home-restore');
    const env = { CANOPY_SECRET_STORE: 'file' };
    const { engine, pause } = pausingEngine(home);
    let paused: PausedBackup | undefined;
    try {
      await engine.loginLocal({ dataDir: path.join(scratch, 'restore-disk') });
      for (const name of ['Photos', 'Again', 'Other'])
        await engine.createBucket({ name, type: 'backup', storageClass: 'hot' });
      await engine.backup({ dir: source, bucket: 'Photos' });

      // The photos deleted by mistake, and restored where they were, slowly.
      rmSync(path.join(source, 'photos'), { recursive: true });
      const stop = new AbortController();
      const restoring = engine.restore({
        bucket: 'Photos',
        overwrite: false,
        downloadBytesPerSecond: 500_000,
        signal: stop.signal,
      });
      while (RestoreMark.runningTargets(home).length === 0)
        await new Promise((resolve) => setTimeout(resolve, 20));
      const waits = `canopy: a restore into ${source} is running; wait for it to finish, then back up (a backup now would record ${source} half restored)\n`;
      // Its bucket's backup, and another bucket's first backup of the same folder.
      for (const bucket of ['Photos', 'Again']) {
        const refused = await runCanopy(home, ['backup', source, '--bucket', bucket], env);
        expect(refused.stderr).toBe(waits);
        expect(refused.status).toBe(1);
      }
      // Nor are its versions pruned from under it.
      const prune = await runCanopy(
        home,
        ['versions', 'prune', '--bucket', 'Photos', '--keep-last', '1'],
        env,
      );
      expect(prune.stderr).toBe(
        `canopy: a restore into ${source} is running; stop it or wait for it to finish, then prune the versions\n`,
      );
      expect(prune.status).toBe(1);
      const other = await runCanopy(home, ['backup', elsewhere, '--bucket', 'Other'], env);
      expect(other.status, other.stderr).toBe(0);
      stop.abort();
      await expect(restoring).rejects.toMatchObject({ code: 'stopped' });
      const restored = await engine.restore({ bucket: 'Photos', overwrite: false });
      // The files the stopped one finished stay, and it brings the rest.
      expect(restored.files + restored.alreadyThere).toBe(6);
      expect(readdirSync(path.join(source, 'photos')).sort()).toEqual(
        [0, 1, 2, 3, 4, 5].map((i) => `p${i}.jpg`),
      );

      // And the other way: a backup of the folder runs (stopped at its first file).
      writeSettled(path.join(source, 'new.txt'), 'new');
      paused = pause();
      const backingUp = engine.backup({ dir: source, bucket: 'Photos' });
      await paused.firstFileRead;
      const intoIt = await runCanopy(home, ['restore', '--bucket', 'Photos'], env);
      expect(intoIt.stderr).toBe(
        `canopy: a backup of ${source} to bucket "Photos" is running; wait for it to finish, then restore (a restore now would change the folder while it is read)\n`,
      );
      expect(intoIt.status).toBe(1);
      const toOther = await runCanopy(
        home,
        ['restore', '--bucket', 'Photos', '--to', path.join(scratch, 'copy-of-photos')],
        env,
      );
      expect(toOther.status, toOther.stderr).toBe(0);
      paused.resume();
      expect(await backingUp).toMatchObject({ files: 7 });
    } finally {
      paused?.resume();
      await engine.close();
    }
  });

  it('runs two backups to two buckets at once, from two processes on one home, and both restore', async () => {
    const home = path.join(scratch, 'home-two');
    const env = { CANOPY_SECRET_STORE: 'file' };
    const sources = ['music', 'papers'].map((name) => {
      const dir = path.join(scratch, 'two', name);
      mkdirSync(dir, { recursive: true });
      // Settled: a file modified right before a backup is read again by the next, whose
      // bytesRead below would then not tell a whole index from a partial one.
      for (let i = 0; i < 40; i += 1)
        writeSettled(
          path.join(dir, `${name}-${i}.bin`),
          randomBytes(i % 4 === 0 ? 1 << 20 : 20_000),
        );
      return { name, dir };
    });
    const login = await runCanopy(
      home,
      ['login', '--local', '--data', path.join(scratch, 'two-disk')],
      env,
    );
    expect(login.status, login.stderr).toBe(0);
    for (const { name } of sources)
      expect((await runCanopy(home, ['buckets', 'create', name], env)).status).toBe(0);

    const backups = await Promise.all(
      sources.map(({ name, dir }) => runCanopy(home, ['backup', dir, '--bucket', name], env)),
    );
    for (const backup of backups) {
      expect(backup.stderr).toBe('');
      expect(backup.status).toBe(0);
    }
    for (const { name, dir } of sources) {
      const target = path.join(scratch, 'two-restored', name);
      const restored = await runCanopy(home, ['restore', '--bucket', name, '--to', target], env);
      expect(restored.status, restored.stderr).toBe(0);
      for (let i = 0; i < 40; i += 1) {
        const file = `${name}-${i}.bin`;
        expect(
          readFileSync(path.join(target, file)).equals(readFileSync(path.join(dir, file))),
        ).toBe(true);
      }
      // Each backup's file index is whole: the next finds nothing to read.
      const again = await runCanopy(home, ['backup', dir, '--bucket', name, '--json'], env);
      expect(JSON.parse(again.stdout)).toMatchObject({ unchanged: true, bytesRead: 0 });
    }
  });
});
