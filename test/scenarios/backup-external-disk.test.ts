import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine, type EngineDeps } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { walkSource } from '../../main/scanner/index.ts';
import { READ_ONLY_MSG } from '../../main/protocol/index.ts';
import { loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { mountExfat, type ExfatDisk } from '../helpers/limited-disks.ts';
import { runServerCommand } from '../helpers/server-process.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// External exFAT disks (USB sticks), through FUSE on loop devices. Backing one up: its inode
// numbers are made up at each mount, so the file index cannot know a file by them: after the
// stick was unplugged and plugged in again, a backup must still recognise the files it read
// last time. Keeping the backups on one: while it is unplugged, Canopy must say so and make
// nothing in its place. Pulled out while in use (the backups' disk, a backup's source, a
// restore's target), the disk must be named as the reason, and the next run must finish the
// job. The command line where a user sees the message; the engine where a test seam must pull
// the disk out at a given moment.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-external-'));
chmodSync(scratch, 0o755);
const home = path.join(scratch, 'home');
const fileStore = { CANOPY_SECRET_STORE: 'file' };
let disk: ExfatDisk;

interface BackupJson {
  unchanged: boolean;
  bytesRead: number;
  filesUnchanged: number;
  files: number;
}

async function backup(): Promise<BackupJson> {
  const run = await runCanopy(home, ['backup', disk.dir, '--bucket', 'Stick', '--json'], fileStore);
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as BackupJson;
}

/** Writes `bytes` to `name` on the disk, dated a minute back (a file written in the last
 * seconds before a backup is always read again by the next one). */
function writeOld(name: string, bytes: Uint8Array): void {
  const file = path.join(disk.dir, name);
  writeFileSync(file, bytes);
  const aMinuteAgo = new Date(Date.now() - 60_000);
  utimesSync(file, aMinuteAgo, aMinuteAgo);
}

beforeAll(async () => {
  disk = mountExfat(path.join(scratch, 'stick'), 64);
  await loginWithBucket(home, path.join(scratch, 'local'), 'Stick');
}, 60_000);

afterAll(() => {
  disk.unmount();
  rmSync(scratch, { recursive: true, force: true });
});

describe('backup of an external exFAT disk', () => {
  it('reads no file again after the disk is plugged in again, and only the one that changed', async () => {
    mkdirSync(path.join(disk.dir, 'photos'));
    writeOld('photos/one.jpg', randomBytes(300_000));
    writeOld('photos/two.jpg', randomBytes(200_000));
    writeOld('notes.txt', randomBytes(1000));
    const first = await backup();
    expect(first.bytesRead).toBe(501_000);

    // exFAT keeps no time for its root folder: the driver makes one up at mount, so the first
    // backup after a remount may make a version for that alone, but reads no file for it.
    disk.remount();
    const replugged = await backup();
    expect(replugged).toMatchObject({ bytesRead: 0, filesUnchanged: 3 });

    disk.remount();
    const again = await backup();
    expect(again).toMatchObject({ unchanged: true, bytesRead: 0 });

    disk.remount();
    writeOld('notes.txt', randomBytes(1000));
    const changed = await backup();
    expect(changed).toMatchObject({ unchanged: false, bytesRead: 1000, filesUnchanged: 2 });
  });

  it('refuses to back up its empty mount point while it is unplugged, and an emptied folder unless asked', async () => {
    await backup();
    const listed = async (bucket: string) =>
      (await runCanopy(home, ['versions', '--bucket', bucket], fileStore)).stdout;
    const before = await listed('Stick');
    disk.unplug();
    try {
      const refused = await runCanopy(home, ['backup', disk.dir, '--bucket', 'Stick'], fileStore);
      expect(refused.status).toBe(1);
      expect(refused.stderr).toBe(
        `canopy: ${disk.dir} is empty, but its last backup held 4 files and folders: if it is on a disk, connect it; to back up the empty folder anyway, add --allow-empty\n`,
      );
      expect(await listed('Stick')).toBe(before);
    } finally {
      disk.plugIn();
    }
    expect((await backup()).files).toBe(3);

    // A folder emptied on purpose is backed up when asked.
    const folder = path.join(scratch, 'emptied');
    mkdirSync(folder);
    writeFileSync(path.join(folder, 'only.txt'), 'the one file');
    // Dated back, so that the index keeps it (a file written the moment before is read again).
    const aMinuteAgo = new Date(Date.now() - 60_000);
    utimesSync(path.join(folder, 'only.txt'), aMinuteAgo, aMinuteAgo);
    const created = await runCanopy(home, ['buckets', 'create', 'Emptied'], fileStore);
    expect(created.status, created.stderr).toBe(0);
    const args = ['backup', folder, '--bucket', 'Emptied', '--json'];
    expect((await runCanopy(home, args, fileStore)).status).toBe(0);
    rmSync(path.join(folder, 'only.txt'));
    const notAsked = await runCanopy(home, args, fileStore);
    expect(notAsked.status).toBe(1);
    expect(notAsked.stderr).toContain('its last backup held 1 file or folder');
    const asked = await runCanopy(home, [...args, '--allow-empty'], fileStore);
    expect(asked.status, asked.stderr).toBe(0);
    expect(JSON.parse(asked.stdout)).toMatchObject({ files: 0 });
    // The index now knows the folder empty: the next backup needs no asking.
    expect((await runCanopy(home, args, fileStore)).status).toBe(0);
  });
});

/** Runs `use` with a fresh exFAT stick named `name` in the scratch folder, unmounted after. */
async function withStick(
  name: string,
  sizeMiB: number,
  use: (stick: ExfatDisk) => Promise<void>,
): Promise<void> {
  const stick = mountExfat(path.join(scratch, name), sizeMiB);
  try {
    await use(stick);
  } finally {
    stick.unmount();
  }
}

describe('backups kept on an external exFAT disk', () => {
  it('are refused clearly while the disk is unplugged or pulled out, browsed from the cache, restored from while it is read-only, and all there once it is back', async () => {
    await withStick('backup-disk', 64, async (backupDisk) => {
      const deviceHome = path.join(scratch, 'home-backups-outside');
      const data = path.join(backupDisk.dir, 'canopy');
      await loginWithBucket(deviceHome, data, 'Docs');
      const source = path.join(scratch, 'docs');
      mkdirSync(source);
      writeFileSync(path.join(source, 'report.txt'), 'quarterly numbers\n');
      const first = await runCanopy(deviceHome, ['backup', source, '--bucket', 'Docs'], fileStore);
      expect(first.status, first.stderr).toBe(0);

      backupDisk.unplug();
      const restoredTo = path.join(scratch, 'docs-back');
      for (const args of [
        ['backup', source, '--bucket', 'Docs'],
        ['restore', '--bucket', 'Docs', '--to', restoredTo],
      ]) {
        const refused = await runCanopy(deviceHome, args, fileStore);
        expect(refused.status).toBe(1);
        expect(refused.stderr).toContain(
          `the backups of this device are not in ${data}: if they are on an external disk, connect it and try again`,
        );
      }
      // Which account this device is on needs no disk either.
      const who = await runCanopy(deviceHome, ['whoami'], fileStore);
      expect(who.status, who.stderr).toBe(0);
      expect(who.stdout.startsWith(`logged in to this computer (${data})\n`)).toBe(true);
      expect(who.stdout).toMatch(/\nuser [0-9a-f-]+ <local@canopy\.invalid>\ndevice key /);
      expect(who.stderr).toBe(
        'canopy: the disk holding the backups is not connected; showing the account as this device enrolled it\n',
      );
      // Browsing needs no disk: the last version seen comes from the home's metadata cache.
      const browsed = await runCanopy(deviceHome, ['ls', '--bucket', 'Docs'], fileStore);
      expect(browsed.status, browsed.stderr).toBe(0);
      expect(browsed.stdout).toContain('report.txt');
      expect(browsed.stderr).toMatch(
        /^canopy: the disk holding the backups is not connected; showing version [0-9a-f-]+, the active one as of \d{4}-/,
      );
      // The mount point stays empty: a service made there would keep the disk from mounting.
      expect(readdirSync(backupDisk.dir)).toEqual([]);

      backupDisk.plugIn();
      const restored = await runCanopy(
        deviceHome,
        ['restore', '--bucket', 'Docs', '--to', restoredTo],
        fileStore,
      );
      expect(restored.status, restored.stderr).toBe(0);
      expect(readFileSync(path.join(restoredTo, 'report.txt'), 'utf8')).toBe('quarterly numbers\n');
      const again = await runCanopy(deviceHome, ['backup', source, '--bucket', 'Docs'], fileStore);
      expect(again.status, again.stderr).toBe(0);

      // Mounted read-only (as after an unsafe removal), its backups are still restored, listed
      // and verified; a backup, or any change, is refused with what to do.
      backupDisk.unplug();
      backupDisk.plugIn({ readOnly: true });
      const fromReadOnly = path.join(scratch, 'docs-read-only');
      const readOnly = await runCanopy(
        deviceHome,
        ['restore', '--bucket', 'Docs', '--to', fromReadOnly],
        fileStore,
      );
      expect(readOnly.status, readOnly.stderr).toBe(0);
      expect(readFileSync(path.join(fromReadOnly, 'report.txt'), 'utf8')).toBe(
        'quarterly numbers\n',
      );
      const versions = await runCanopy(deviceHome, ['versions', '--bucket', 'Docs'], fileStore);
      expect(versions.status, versions.stderr).toBe(0);
      expect(versions.stdout).toContain(' active ');
      expect(versions.stdout).toMatch(/^ID +STATE +CREATED +FILES +SIZE +NEW DATA +PINNED$/m);
      for (const args of [
        ['ls', '--bucket', 'Docs'],
        ['verify', '--bucket', 'Docs', '--all'],
      ]) {
        const read = await runCanopy(deviceHome, args, fileStore);
        expect(read.status, read.stderr).toBe(0);
        expect(read.stderr).toBe('');
      }
      // canopy-server check reads its backups back from the disk before it is trusted again.
      const checked = runServerCommand(['check', '--data', data]);
      expect(checked.stdout).toMatch(/^checked [1-9]\d* blocks? \(.*: all whole\n$/);
      expect(checked.status).toBe(0);
      const notifying = runServerCommand(['check', '--data', data, '--notify']);
      expect(notifying.stderr).toBe(
        `canopy-server: ${data} is on a disk mounted read-only, where --notify cannot leave notifications: check without it, or mount the disk writable\n`,
      );
      expect(notifying.status).toBe(1);
      const noBackup = await runCanopy(
        deviceHome,
        ['backup', source, '--bucket', 'Docs'],
        fileStore,
      );
      expect(noBackup.status).toBe(1);
      expect(noBackup.stderr).toBe(
        `canopy: the backups in ${data} are on a disk mounted read-only: they can be browsed and restored, but a backup needs the disk mounted writable (after checking it for errors)\n`,
      );
      const noChange = await runCanopy(deviceHome, ['buckets', 'create', 'More'], fileStore);
      expect(noChange.status).toBe(1);
      expect(noChange.stderr).toBe(`canopy: ${READ_ONLY_MSG}\n`);
      const newDevice = await runCanopy(
        path.join(scratch, 'home-read-only-login'),
        ['login', '--local', '--data', data],
        fileStore,
      );
      expect(newDevice.status).toBe(1);
      expect(newDevice.stderr).toContain(
        `${data} is on a disk mounted read-only, so Canopy cannot keep backups there: mount it writable`,
      );

      // Pulled out while mounted: its driver is gone, and the mount answers only ENOTCONN.
      backupDisk.unplug();
      backupDisk.plugIn();
      backupDisk.pullOut();
      const pulled = await runCanopy(deviceHome, ['backup', source, '--bucket', 'Docs'], fileStore);
      expect(pulled.status).toBe(1);
      expect(pulled.stderr).toContain(
        `the backups of this device are not in ${data}: if they are on an external disk, connect it and try again`,
      );
      // The versions as last listed, and said to be so.
      const lastSeen = await runCanopy(deviceHome, ['versions', '--bucket', 'Docs'], fileStore);
      expect(lastSeen.status, lastSeen.stderr).toBe(0);
      expect(lastSeen.stdout).toBe(versions.stdout);
      expect(lastSeen.stderr).toMatch(
        /^canopy: the disk holding the backups is not connected; showing the versions as of \d{4}-/,
      );
      backupDisk.plugIn();
      const plugged = await runCanopy(
        deviceHome,
        ['backup', source, '--bucket', 'Docs'],
        fileStore,
      );
      expect(plugged.status, plugged.stderr).toBe(0);
    });
  });
});

describe('backups kept on a disk mounted at another place', () => {
  it('are found there, every file recognised unchanged, once logged in again with that place', async () => {
    const home = path.join(scratch, 'home-moved-disk');
    const first = path.join(scratch, 'moved-disk-first-place');
    const source = path.join(scratch, 'moved-disk-files');
    writeSettled(path.join(source, 'letter.txt'), 'dear reader');
    writeSettled(path.join(source, 'photos', 'beach.jpg'), 'sand and sea');
    const canopy = (...args: string[]) => runCanopy(home, args, fileStore);
    expect((await canopy('login', '--local', '--data', first)).status).toBe(0);
    expect((await canopy('buckets', 'create', 'Moved')).status).toBe(0);
    expect((await canopy('backup', source, '--bucket', 'Moved')).status).toBe(0);
    const versions = (await canopy('versions', '--bucket', 'Moved')).stdout;
    // The disk's label taken by another disk: the system mounts it at another place.
    const second = path.join(scratch, 'moved-disk-second-place');
    renameSync(first, second);
    const refused = await canopy('backup', source, '--bucket', 'Moved');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(
      `canopy: the backups of this device are not in ${first}: if they are on an external disk, connect it and try again (mounted at another place now, they are found there after \`canopy logout\` and \`canopy login --local --data\` that place)\n`,
    );
    expect((await canopy('logout')).status).toBe(0);
    expect((await canopy('login', '--local', '--data', second)).status).toBe(0);
    expect((await canopy('versions', '--bucket', 'Moved')).stdout).toBe(versions);
    const again = await canopy('backup', source, '--bucket', 'Moved');
    expect(again.stderr).toBe('');
    expect(again.stdout).toMatch(/^nothing changed since version /);
    expect(again.stdout).toContain('2 files (2 unchanged, not read again)');
    const restored = path.join(scratch, 'moved-disk-restored');
    expect((await canopy('restore', '--bucket', 'Moved', '--to', restored)).status).toBe(0);
    expect(readFileSync(path.join(restored, 'photos', 'beach.jpg'), 'utf8')).toBe('sand and sea');
  });
});

describe('a disk pulled out while in use', () => {
  /**
   * Runs `use` with an engine on `home` (the embedded service, the given test seams), closed
   * after; with `bucket`, logged in to a service on `dataDir` with that bucket created first.
   */
  async function withEngine(
    home: string,
    seams: Partial<EngineDeps>,
    use: (engine: Engine) => Promise<void>,
    login?: { readonly dataDir: string; readonly bucket: string },
  ): Promise<void> {
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      startLocalService,
      ...seams,
    });
    try {
      if (login) {
        await engine.loginLocal({ dataDir: login.dataDir });
        await engine.createBucket({ name: login.bucket, type: 'backup', storageClass: 'hot' });
      }
      await use(engine);
    } finally {
      await engine.close();
    }
  }
  /** A few retries, quickly: a disk that is gone does not come back between them. */
  const quickRetries = { retry: { attempts: 2, baseDelayMs: 10, maxDelayMs: 10 } };
  /** A backup's seam that pulls `stick` out once the `count`th file was read. */
  const pullAfterReading = (stick: ExfatDisk, count: number): Partial<EngineDeps> => {
    let read = 0;
    return {
      afterFileRead: () => {
        read += 1;
        if (read === count) stick.pullOut();
        return Promise.resolve();
      },
    };
  };

  /** `count` files of 1 MiB of random bytes in a new folder `dir`; their bytes. */
  const writeParts = (dir: string, count: number): Buffer[] => {
    mkdirSync(dir, { recursive: true });
    const parts = Array.from({ length: count }, () => randomBytes(1 << 20));
    parts.forEach((bytes, index) => writeFileSync(path.join(dir, `part-${index}.bin`), bytes));
    return parts;
  };
  const expectParts = (dir: string, parts: readonly Buffer[]): void => {
    parts.forEach((bytes, index) =>
      expect(readFileSync(path.join(dir, `part-${index}.bin`)).equals(bytes)).toBe(true),
    );
  };

  it('names the backup disk as the reason of a failed backup; once it is back, the next backup finishes and restores byte for byte', async () => {
    await withStick('pulled-disk', 64, async (backupDisk) => {
      const deviceHome = path.join(scratch, 'home-pulled');
      const data = path.join(backupDisk.dir, 'canopy');
      const source = path.join(scratch, 'pulled-source');
      const parts = writeParts(source, 4);
      const pulling = {
        ...quickRetries,
        // Shards of one leaf each, so that the disk goes with shards still to send.
        shardTargetBytes: (1 << 20) + 1024,
        afterShardConfirmed: (confirmed: number) => {
          if (confirmed === 1) backupDisk.pullOut();
        },
      };
      await withEngine(
        deviceHome,
        pulling,
        async (engine) => {
          await expect(engine.backup({ dir: source, bucket: 'Parts' })).rejects.toMatchObject({
            code: 'local_data_missing',
            message: `the disk holding the backups (${data}) went away during the backup: connect it and run the backup again; what it stored before stays`,
          });
        },
        { dataDir: data, bucket: 'Parts' },
      );

      backupDisk.plugIn();
      await withEngine(deviceHome, {}, async (engine) => {
        expect((await engine.backup({ dir: source, bucket: 'Parts' })).files).toBe(4);
        const restoredTo = path.join(scratch, 'pulled-back');
        await engine.restore({ bucket: 'Parts', to: restoredTo, overwrite: false });
        expectParts(restoredTo, parts);
      });
    });
  });

  it('keeps one engine (the daemon, the app) working once the disk pulled out is plugged in again', async () => {
    await withStick('long-lived-disk', 64, async (backupDisk) => {
      const deviceHome = path.join(scratch, 'home-long-lived');
      const data = path.join(backupDisk.dir, 'canopy');
      const source = path.join(scratch, 'long-lived-source');
      mkdirSync(source);
      writeFileSync(path.join(source, 'notes.txt'), 'first');
      await withEngine(
        deviceHome,
        quickRetries,
        async (engine) => {
          await engine.backup({ dir: source, bucket: 'Notes' });
          // Yanked while the engine's service has its files open on it.
          backupDisk.pullOut();
          writeFileSync(path.join(source, 'notes.txt'), 'second');
          await expect(engine.backup({ dir: source, bucket: 'Notes' })).rejects.toMatchObject({
            code: 'local_data_missing',
            message: `the backups of this device are not in ${data}: if they are on an external disk, connect it and try again (mounted at another place now, they are found there after \`canopy logout\` and \`canopy login --local --data\` that place)`,
          });
          // Back, as another mount: the same engine backs up and restores again.
          backupDisk.plugIn();
          const after = await engine.backup({ dir: source, bucket: 'Notes' });
          expect(after).toMatchObject({ unchanged: false, files: 1 });
          const restoredTo = path.join(scratch, 'long-lived-back');
          await engine.restore({ bucket: 'Notes', to: restoredTo, overwrite: false });
          expect(readFileSync(path.join(restoredTo, 'notes.txt'), 'utf8')).toBe('second');
        },
        { dataDir: data, bucket: 'Notes' },
      );
    });
  });

  it('names the backup disk as the reason of a failed restore; once it is back, the restore gives every byte', async () => {
    await withStick('pulled-restore-disk', 128, async (backupDisk) => {
      const deviceHome = path.join(scratch, 'home-pulled-restore');
      const data = path.join(backupDisk.dir, 'canopy');
      const source = path.join(scratch, 'pulled-restore-source');
      // More than one batch of the restore's block requests, so some are asked after the pull.
      const parts = writeParts(source, 40);
      await withEngine(
        deviceHome,
        {},
        async (engine) => {
          await engine.backup({ dir: source, bucket: 'Parts' });
        },
        { dataDir: data, bucket: 'Parts' },
      );

      const pulling = {
        ...quickRetries,
        afterFileRestored: (written: number) => {
          if (written === 1) backupDisk.pullOut();
        },
      };
      await withEngine(deviceHome, pulling, async (engine) => {
        const interrupted = engine.restore({
          bucket: 'Parts',
          to: path.join(scratch, 'pulled-restore-first'),
          overwrite: false,
        });
        await expect(interrupted).rejects.toMatchObject({
          code: 'local_data_missing',
          message: `the disk holding the backups (${data}) went away during the restore: connect it and run the restore again`,
        });
      });

      backupDisk.plugIn();
      await withEngine(deviceHome, {}, async (engine) => {
        const restoredTo = path.join(scratch, 'pulled-restore-again');
        await engine.restore({ bucket: 'Parts', to: restoredTo, overwrite: false });
        expectParts(restoredTo, parts);
      });
    });
  });

  it('names a stick being backed up that is pulled out during the backup; plugged in again, the next backup has every file', async () => {
    await withStick('pulled-source-stick', 64, async (stick) => {
      const files = Array.from({ length: 12 }, (_, index) => ({
        name: `photo-${index}.jpg`,
        bytes: randomBytes(300_000),
      }));
      for (const file of files) writeFileSync(path.join(stick.dir, file.name), file.bytes);
      await withEngine(
        path.join(scratch, 'home-pulled-source'),
        pullAfterReading(stick, 3),
        async (engine) => {
          await expect(engine.backup({ dir: stick.dir, bucket: 'Stick' })).rejects.toMatchObject({
            code: 'disk_unavailable',
            message: `the disk holding ${stick.dir} stopped answering during the backup (ENOTCONN): connect it, or check it for errors, and run the backup again`,
          });
          stick.plugIn();
          const again = await engine.backup({ dir: stick.dir, bucket: 'Stick' });
          expect(again).toMatchObject({ files: 12, skipped: [] });
          const restoredTo = path.join(scratch, 'pulled-source-back');
          await engine.restore({ bucket: 'Stick', to: restoredTo, overwrite: false });
          for (const file of files)
            expect(readFileSync(path.join(restoredTo, file.name)).equals(file.bytes)).toBe(true);
        },
        { dataDir: path.join(scratch, 'pulled-source-data'), bucket: 'Stick' },
      );
    });
  });

  it('names a stick restored onto that is pulled out during the restore; plugged in again, the restore gives every byte', async () => {
    await withStick('pulled-target-stick', 128, async (stick) => {
      const source = path.join(scratch, 'pulled-target-source');
      const parts = writeParts(source, 40);
      let written = 0;
      const pulling = {
        afterFileRestored: () => {
          written += 1;
          if (written === 1) stick.pullOut();
        },
      };
      await withEngine(
        path.join(scratch, 'home-pulled-target'),
        pulling,
        async (engine) => {
          await engine.backup({ dir: source, bucket: 'Parts' });
          const target = path.join(stick.dir, 'parts');
          await expect(
            engine.restore({ bucket: 'Parts', to: target, overwrite: false }),
          ).rejects.toMatchObject({
            code: 'disk_unavailable',
            message: `the disk holding ${target} stopped answering during the restore (ENOTCONN): connect it, or check it for errors, and run the restore again`,
          });
          // While the stick still does not answer, a restore elsewhere goes on; what the first
          // run left on the stick waits for it.
          const elsewhere = await engine.restore({
            bucket: 'Parts',
            path: 'part-0.bin',
            to: path.join(scratch, 'pulled-target-elsewhere'),
            overwrite: false,
          });
          expect(elsewhere).toMatchObject({ files: 1, leftoversRemoved: 0 });
          stick.plugIn();
          // Run again, it removes what the first run left under temporary names on the stick,
          // and gives each file once: none beside a copy the first run put in place.
          const again = await engine.restore({ bucket: 'Parts', to: target, overwrite: false });
          expect(again).toMatchObject({ renamed: [], notRestored: [] });
          expect(again.leftoversRemoved).toBeGreaterThan(0);
          expect(readdirSync(target).sort()).toEqual(parts.map((_, i) => `part-${i}.bin`).sort());
          expectParts(target, parts);
        },
        { dataDir: path.join(scratch, 'pulled-target-data'), bucket: 'Parts' },
      );
    });
  });

  it('stops a backup whose stick is pulled out while its files are read, rather than store a version without the rest', async () => {
    await withStick('pulled-between-stick', 64, async (stick) => {
      for (let folder = 0; folder < 4; folder += 1) {
        mkdirSync(path.join(stick.dir, `album-${folder}`));
        for (let index = 0; index < 30; index += 1) {
          const note = path.join(stick.dir, `album-${folder}`, `note-${index}.txt`);
          writeFileSync(note, `${folder}/${index}`);
        }
      }
      await withEngine(
        path.join(scratch, 'home-pulled-between'),
        { ...quickRetries, ...pullAfterReading(stick, 10) },
        async (engine) => {
          await expect(engine.backup({ dir: stick.dir, bucket: 'Notes' })).rejects.toMatchObject({
            code: 'disk_unavailable',
          });
          // No version was pushed of the few files read before: the rest was not unreadable, gone.
          expect(await engine.listVersions({ bucket: 'Notes' })).toEqual([]);
          stick.plugIn();
          expect(await engine.backup({ dir: stick.dir, bucket: 'Notes' })).toMatchObject({
            files: 120,
            skipped: [],
          });
        },
        { dataDir: path.join(scratch, 'pulled-between-data'), bucket: 'Notes' },
      );
    });
  });

  it('stops a walk whose stick is pulled out, rather than report each entry after as unreadable', async () => {
    await withStick('pulled-walk-stick', 64, async (stick) => {
      for (let folder = 0; folder < 3; folder += 1) {
        mkdirSync(path.join(stick.dir, `album-${folder}`));
        writeFileSync(path.join(stick.dir, `album-${folder}`, 'note.txt'), 'note');
      }
      const skipped: string[] = [];
      const walk = walkSource(stick.dir, { onSkip: (item) => skipped.push(item.path) });
      expect((await walk.next()).value).toMatchObject({ path: 'album-0' });
      stick.pullOut();
      await expect(
        (async () => {
          for await (const entry of walk) void entry;
        })(),
      ).rejects.toMatchObject({ code: 'ENOTCONN' });
      expect(skipped).toEqual([]);
      stick.plugIn();
    });
  });
});
