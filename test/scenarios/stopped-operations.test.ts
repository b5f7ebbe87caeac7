import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { canopyProcess } from '../helpers/canopy-command-line.ts';
import { onTerminal } from '../helpers/on-terminal.ts';
import type { FaultProxy } from '../helpers/fault-proxy.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';

// A backup, a restore or a verify stopped by its caller (Ctrl-C at the command line, a Stop
// button in the window) ends as a failure does: with `stopped`, nothing half-written, nothing
// staged left behind, and a next run that finishes what it began.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-stopped-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A folder of six settled 1 MiB files, so the file index may vouch for them once stored. */
function sixFiles(name: string): string {
  const source = path.join(scratch, name, 'source');
  for (let i = 0; i < 6; i += 1)
    writeSettled(path.join(source, `part-${i}.bin`), randomBytes(1 << 20));
  return source;
}

/** A home logged in to the service through a fault proxy (behindProxy). */
interface BehindProxy {
  readonly proxy: FaultProxy;
  /** Six settled files to back up. */
  readonly source: string;
  readonly home: string;
  readonly env: Record<string, string>;
}

/**
 * Runs `work` with the service behind a fault proxy, which is its storage host too (so shard
 * uploads can stall there), and a home named `name` logged in through it, with bucket `bucket`.
 */
async function behindProxy(
  name: string,
  bucket: string,
  work: (setup: BehindProxy) => Promise<void>,
): Promise<void> {
  const { service, proxy } = await startProxiedService();
  try {
    const source = sixFiles(name);
    const home = path.join(scratch, name, 'home');
    const env = { CANOPY_SECRET_STORE: 'file' };
    const { code } = service.addUser('ann@example.org');
    const login = await runCanopy(home, ['login', '--server', proxy.url, '--code', code], env);
    expect(login.status, login.stderr).toBe(0);
    const created = await runCanopy(home, ['buckets', 'create', bucket], env);
    expect(created.status, created.stderr).toBe(0);
    await work({ proxy, source, home, env });
  } finally {
    await proxy.close();
    await service.close();
  }
}

/** Every file below `dir`, by its path below it. */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort();
}

function expectSameFiles(copy: string, source: string, files: readonly string[]): void {
  for (const file of files)
    expect(readFileSync(path.join(copy, file)).equals(readFileSync(path.join(source, file)))).toBe(
      true,
    );
}

/** An engine on its own home with the embedded service, stopped by `controller` from `hooks`. */
function engineOn(home: string, hooks: Partial<Parameters<typeof createEngine>[0]> = {}): Engine {
  return createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    shardTargetBytes: 1_500_000,
    ...hooks,
  });
}

describe('a stopped operation', () => {
  it('a backup stopped while it reads stores nothing, leaves nothing staged, and the next one stores it all', async () => {
    const source = sixFiles('reading');
    const home = path.join(scratch, 'reading', 'home');
    const controller = new AbortController();
    let read = 0;
    const engine = engineOn(home, {
      afterFileRead: () => {
        read += 1;
        if (read === 3) controller.abort();
        return Promise.resolve();
      },
    });
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Stop', type: 'backup', storageClass: 'hot' });
      const stopped = engine.backup({ dir: source, bucket: 'Stop', signal: controller.signal });
      await expect(stopped).rejects.toMatchObject({
        code: 'stopped',
        message: expect.stringMatching(/^the backup was stopped: run it again to finish it/),
      });
      expect(read).toBeLessThan(6);
      expect(await engine.listVersions({ bucket: 'Stop' })).toEqual([]);
      expect(stagedLeftovers(home)).toEqual([]);

      const again = await engine.backup({ dir: source, bucket: 'Stop' });
      expect(again).toMatchObject({ resumedVersionId: null, newBytes: 6 << 20 });
      const target = path.join(scratch, 'reading', 'restored');
      await engine.restore({ bucket: 'Stop', to: target, overwrite: false });
      expectSameFiles(target, source, filesBelow(source));
    } finally {
      await engine.close();
    }
  });

  it('a backup stopped during its upload keeps its shards, and the next one finishes it without reading a file again', async () => {
    const source = sixFiles('uploading');
    const home = path.join(scratch, 'uploading', 'home');
    const controller = new AbortController();
    const engine = engineOn(home, {
      afterShardConfirmed: (confirmed) => {
        if (confirmed === 2) controller.abort();
      },
    });
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Stop', type: 'backup', storageClass: 'hot' });
      await expect(
        engine.backup({ dir: source, bucket: 'Stop', signal: controller.signal }),
      ).rejects.toMatchObject({ code: 'stopped' });
      expect((await engine.listVersions({ bucket: 'Stop' })).map((v) => v.state)).toEqual([
        'pending',
      ]);

      const again = await engine.backup({ dir: source, bucket: 'Stop' });
      expect(again).toMatchObject({
        resumedVersionId: expect.any(String),
        unchanged: true,
        filesUnchanged: 6,
        bytesRead: 0,
      });
      expect((await engine.listVersions({ bucket: 'Stop' })).map((v) => v.state)).toEqual([
        'active',
      ]);
      expect(stagedLeftovers(home)).toEqual([]);
      await expect(
        engine.verify({ bucket: 'Stop', all: true, signal: AbortSignal.abort() }),
      ).rejects.toMatchObject({
        code: 'stopped',
        message: 'the verify was stopped before it checked every block',
      });
      const target = path.join(scratch, 'uploading', 'restored');
      await engine.restore({ bucket: 'Stop', to: target, overwrite: false });
      expectSameFiles(target, source, filesBelow(source));
    } finally {
      await engine.close();
    }
  });

  it('a restore stopped part-way leaves its whole files under their names and nothing temporary, and the next brings the rest', async () => {
    const source = path.join(scratch, 'restore', 'source');
    for (let i = 0; i < 40; i += 1)
      writeSettled(path.join(source, 'small', `item-${i}.bin`), randomBytes(64 * 1024));
    writeSettled(path.join(source, 'large.bin'), randomBytes(3 << 20));
    const home = path.join(scratch, 'restore', 'home');
    const controller = new AbortController();
    const engine = engineOn(home, {
      afterFileRestored: (written) => {
        if (written === 10) controller.abort();
      },
    });
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Stop', type: 'backup', storageClass: 'hot' });
      await engine.backup({ dir: source, bucket: 'Stop' });
      const target = path.join(scratch, 'restore', 'restored');
      mkdirSync(target);
      await expect(
        engine.restore({ bucket: 'Stop', to: target, overwrite: false, signal: controller.signal }),
      ).rejects.toMatchObject({
        code: 'stopped',
        message:
          'the restore was stopped: the files it finished are in place, and running it again brings the rest',
      });
      const present = filesBelow(target);
      expect(present.filter((file) => path.basename(file).startsWith('.canopy-restore-'))).toEqual(
        [],
      );
      expect(present.length).toBeGreaterThanOrEqual(10);
      expect(present.length).toBeLessThan(41);
      expectSameFiles(target, source, present);

      const again = await engine.restore({ bucket: 'Stop', to: target, overwrite: false });
      expect(again).toMatchObject({ alreadyThere: present.length, renamed: [] });
      expect(filesBelow(target)).toEqual(filesBelow(source));
      expectSameFiles(target, source, filesBelow(source));
    } finally {
      await engine.close();
    }
  });

  it('Ctrl-C or SIGTERM stops `canopy backup` at once, though its upload has stalled, told in JSON with --json, and the next run finishes it', async () => {
    await behindProxy('cli', 'Stop', async ({ proxy, source, home, env }) => {
      // Every shard upload stalls for a minute: the backup waits in its upload.
      proxy.schedule(
        Array.from({ length: 16 }, () => ({ delayMs: 60_000 })),
        /\/upload\/.*\/[a-z0-9]+$/,
      );
      /** Runs `canopy backup` with `more`, sends `signal` once it uploads, and its end. */
      const stopBackup = async (signal: NodeJS.Signals, ...more: string[]) => {
        const canopy = canopyProcess(['backup', source, '--bucket', 'Stop', ...more], {
          ...process.env,
          CANOPY_HOME: home,
          ...env,
        });
        const child = spawn(canopy.command, canopy.args, {
          env: canopy.env,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
        });
        const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
        const uploadsBefore = uploads();
        while (uploads() === uploadsBefore) await new Promise((resolve) => setTimeout(resolve, 20));
        child.kill(signal);
        return { status: await exited, stderr };
      };
      const uploads = (): number =>
        proxy.seen.filter(
          (request) => request.method === 'PUT' && request.path.includes('/upload/'),
        ).length;
      const stopped = await stopBackup('SIGINT');
      expect(stopped.status).toBe(130);
      expect(stopped.stderr).toBe(
        'canopy: the backup was stopped: run it again to finish it (what it stored stays, and only what is missing is sent)\n',
      );
      // Stopped by a service manager, with --json: the failure a script reads, and 128 + 15.
      const scripted = await stopBackup('SIGTERM', '--json');
      expect(scripted.status).toBe(143);
      expect(JSON.parse(scripted.stderr)).toEqual({
        error: {
          code: 'stopped',
          message:
            'the backup was stopped: run it again to finish it (what it stored stays, and only what is missing is sent)',
          retryable: true,
        },
      });

      proxy.schedule([]);
      const again = await runCanopy(home, ['backup', source, '--bucket', 'Stop'], env);
      expect(again.status, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/^finished the interrupted upload of version /m);
      expect(again.stdout).toMatch(/^6 files \(6 unchanged, not read again\), /m);
    });
  });

  it('a closed terminal (SIGHUP) stops `canopy backup` and `canopy restore` cleanly, though they stalled, and the next runs finish them', async () => {
    await behindProxy('terminal', 'Hangup', async ({ proxy, source, home, env }) => {
      const requests = (pattern: RegExp): number =>
        proxy.seen.filter((request) => pattern.test(request.path)).length;
      /** Runs `canopy ARGS` on a terminal, and hangs it up once a request to `stall` is seen. */
      const hungUpDuring = async (stall: RegExp, ...args: string[]) => {
        proxy.schedule(
          Array.from({ length: 16 }, () => ({ delayMs: 60_000 })),
          stall,
        );
        const before = requests(stall);
        const canopy = canopyProcess(args, { ...process.env, CANOPY_HOME: home, ...env });
        const terminal = onTerminal(canopy.command, canopy.args, canopy.env);
        while (requests(stall) === before) await new Promise((resolve) => setTimeout(resolve, 20));
        const ended = await terminal.hangUp();
        proxy.schedule([]);
        return ended;
      };

      // An ssh session dropped during the backup's upload: it stops as a Ctrl-C stops it.
      const backup = await hungUpDuring(
        /\/upload\/.*\/[a-z0-9]+$/,
        'backup',
        source,
        '--bucket',
        'Hangup',
      );
      expect(backup, backup.shown).toMatchObject({ code: 129, signal: null });
      const finished = await runCanopy(home, ['backup', source, '--bucket', 'Hangup'], env);
      expect(finished.status, finished.stderr).toBe(0);
      expect(finished.stdout).toMatch(/^finished the interrupted upload of version /m);
      expect(finished.stdout).toMatch(/^6 files \(6 unchanged, not read again\), /m);
      expect(stagedLeftovers(home)).toEqual([]);

      // A terminal window closed during a restore: no temporary copy is left in the folder.
      const target = path.join(scratch, 'terminal', 'restored');
      mkdirSync(target);
      const restore = await hungUpDuring(
        /\/blocks\/car/,
        'restore',
        '--bucket',
        'Hangup',
        '--to',
        target,
      );
      expect(restore, restore.shown).toMatchObject({ code: 129, signal: null });
      expect(readdirSync(target)).toEqual([]);
      const restored = await runCanopy(
        home,
        ['restore', '--bucket', 'Hangup', '--to', target],
        env,
      );
      expect(restored.status, restored.stderr).toBe(0);
      expect(filesBelow(target)).toEqual(filesBelow(source));
      expectSameFiles(target, source, filesBelow(source));
    });
  });

  it('a backup left running in the background when its terminal closes finishes, and stores its version', async () => {
    await behindProxy('background', 'Disowned', async ({ proxy, source, home, env }) => {
      // The first uploads are slow, so the backup is still running, showing its progress on the
      // terminal, when the terminal closes; it writes more progress after, and its summary.
      const upload = /\/upload\/.*\/[a-z0-9]+$/;
      proxy.schedule(
        Array.from({ length: 3 }, () => ({ delayMs: 1500 })),
        upload,
      );
      const canopy = canopyProcess(['backup', source, '--bucket', 'Disowned'], {
        ...process.env,
        CANOPY_HOME: home,
        ...env,
      });
      const terminal = onTerminal(canopy.command, canopy.args, canopy.env, { background: true });
      while (!proxy.seen.some((request) => upload.test(request.path)))
        await new Promise((resolve) => setTimeout(resolve, 20));
      const ended = await terminal.hangUp();
      expect(ended, ended.shown).toMatchObject({ code: 0, signal: null });

      const versions = await runCanopy(home, ['versions', '--bucket', 'Disowned', '--json'], env);
      expect(versions.status, versions.stderr).toBe(0);
      expect(
        (JSON.parse(versions.stdout) as { state: string }[]).map((version) => version.state),
      ).toEqual(['active']);
      const target = path.join(scratch, 'background', 'restored');
      const restored = await runCanopy(
        home,
        ['restore', '--bucket', 'Disowned', '--to', target],
        env,
      );
      expect(restored.status, restored.stderr).toBe(0);
      expectSameFiles(target, source, filesBelow(source));
      expect(filesBelow(target)).toEqual(filesBelow(source));
    });
  });
});
