import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statfsSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import Database from 'better-sqlite3';
import { cidText, rawCidOf } from '../../main/protocol/index.ts';
import { localHomeBackedUp, loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { backupWithReadsFailing, canopyWithCallsFailing } from '../helpers/failing-disk.ts';
import { nobodyEngine } from '../helpers/nobody-engine.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { writeSparseFile } from '../helpers/sparse-file.ts';
import { cachedFilesOf, keptRowsOf } from '../helpers/kept-state.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import { damageStoredCar } from '../helpers/stored-blocks.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// Failures a user can hit during a backup, with the real CLI: an unreadable file, source folder
// or restore target (as `nobody`, since root reads anything), a missing source folder, names that
// are not UTF-8, sockets, named pipes and devices in the source, a file the disk fails to read
// part way (an I/O error, injected by strace), a home disk or a backup disk failing to write (their
// fsyncs failed by strace), a full backup disk while shards are written, a
// full disk under the Canopy home, and a full disk while restoring (small tmpfs mounts), and a
// block the backup disk lost. Each gets a clear message and loses nothing.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-failures-'));
chmodSync(scratch, 0o755);
const mounts: string[] = [];
afterAll(() => {
  for (const mount of mounts) spawnSync('umount', [mount]);
  rmSync(scratch, { recursive: true, force: true });
});

const fileStore = { CANOPY_SECRET_STORE: 'file' };

/**
 * A folder under the scratch folder on a tmpfs of `size` (e.g. '6m'): a small, full-able disk;
 * of at most `inodes` files, folders and links, if given.
 */
function mountTmpfs(name: string, size: string, inodes?: number): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir);
  const options = `size=${size}${inodes === undefined ? '' : `,nr_inodes=${inodes}`}`;
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], {
    encoding: 'utf8',
  });
  expect(mounted.status, mounted.stderr).toBe(0);
  mounts.push(dir);
  return dir;
}

/**
 * The path of `before` + é + `after` in `dir`, the é in Latin-1 as an old system wrote it: bytes
 * to Linux, but not UTF-8 text, which UnixFS names must be.
 */
function latin1Name(dir: string, before: string, after: string): Buffer {
  return Buffer.concat([Buffer.from(`${dir}/${before}`), Buffer.from([0xe9]), Buffer.from(after)]);
}

describe('backup failures', () => {
  it('skips an unreadable file with a reason, backs up the rest, and picks it up once readable', () => {
    const source = path.join(scratch, 'source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'readable.txt'), 'fine');
    writeFileSync(path.join(source, 'secret.txt'), 'not for nobody');
    chmodSync(source, 0o755);
    chmodSync(path.join(source, 'readable.txt'), 0o644);
    chmodSync(path.join(source, 'secret.txt'), 0o600);
    const home = path.join(scratch, 'nobody-home');
    const asNobody = nobodyEngine(home);
    const login = asNobody(['login', 'Docs']);
    expect(login.stderr).toBe('');
    expect(login.status).toBe(0);
    const first = asNobody(['backup', source, 'Docs']);
    expect(first.status).toBe(0);
    const firstResult = JSON.parse(first.stdout) as {
      files: number;
      skipped: Array<{ path: string; reason: string; kind: string }>;
    };
    expect(firstResult.files).toBe(1);
    expect(firstResult.skipped).toEqual([
      { path: 'secret.txt', reason: 'permission denied', kind: 'unreadable' },
    ]);
    chmodSync(path.join(source, 'secret.txt'), 0o644);
    const second = JSON.parse(asNobody(['backup', source, 'Docs']).stdout) as {
      files: number;
      skipped: unknown[];
    };
    expect(second).toMatchObject({ files: 2, skipped: [] });
    const target = path.join(home, 'restored');
    expect(asNobody(['restore', 'Docs', target]).status).toBe(0);
    expect(readFileSync(path.join(target, 'secret.txt'), 'utf8')).toBe('not for nobody');
    // Run again, the file it may no longer read cannot be told the same: the version's copy
    // goes beside it, and the one it can read, unchanged, is left alone.
    chmodSync(path.join(target, 'secret.txt'), 0o000);
    const again = asNobody(['restore', 'Docs', target]);
    expect(again.stderr).toBe('');
    expect(readdirSync(target).sort()).toEqual([
      'readable.txt',
      'secret (restored).txt',
      'secret.txt',
    ]);
    expect(readFileSync(path.join(target, 'secret (restored).txt'), 'utf8')).toBe('not for nobody');
  });

  it('refuses a source folder it cannot read, and a restore target it cannot write, clearly', () => {
    const asNobody = nobodyEngine(path.join(scratch, 'nobody-refused-home'));
    expect(asNobody(['login', 'Private']).status).toBe(0);
    // root's own folder, closed to others: listing it would pass for an empty source.
    const closed = path.join(scratch, 'closed-source');
    mkdirSync(closed);
    writeFileSync(path.join(closed, 'diary.txt'), 'private');
    chmodSync(closed, 0o700);
    const refused = asNobody(['backup', closed, 'Private']);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(`permission_denied: cannot read ${closed}: permission denied\n`);

    const open = path.join(scratch, 'open-source');
    mkdirSync(open);
    writeFileSync(path.join(open, 'notes.txt'), 'shared');
    chmodSync(open, 0o755);
    chmodSync(path.join(open, 'notes.txt'), 0o644);
    expect(asNobody(['backup', open, 'Private']).status).toBe(0);
    // A folder root owns and others may only read.
    const readOnly = path.join(scratch, 'root-only');
    mkdirSync(readOnly);
    chmodSync(readOnly, 0o755);
    const target = path.join(readOnly, 'restored');
    const notWritten = asNobody(['restore', 'Private', target]);
    expect(notWritten.status).toBe(1);
    expect(notWritten.stderr).toBe(
      `permission_denied: cannot write in ${readOnly}: permission denied\n`,
    );
    expect(readdirSync(readOnly)).toEqual([]);
  });

  it('tells a missing folder and a file apart from a source folder, before any network', async () => {
    // A home that never logged in: the folder is checked first.
    const home = path.join(scratch, 'unused-home');
    const engine = createEngine({ home, secrets: new FileSecretStore(home) });
    try {
      const missing = path.join(scratch, 'no-such-folder');
      await expect(engine.backup({ dir: missing, bucket: 'Any' })).rejects.toMatchObject({
        code: 'not_found',
        message: `there is no folder ${missing} to back up`,
      });
      const file = path.join(scratch, 'a-file.txt');
      writeFileSync(file, 'not a folder');
      await expect(engine.backup({ dir: file, bucket: 'Any' })).rejects.toMatchObject({
        code: 'usage',
        message: `${file} is not a folder; a backup takes a folder`,
      });
      await expect(engine.planBackup({ dir: missing })).rejects.toMatchObject({
        code: 'not_found',
      });
    } finally {
      await engine.close();
    }
  });

  it('skips a name or a link target that is not UTF-8 with a reason, and backs up the rest', async () => {
    const source = path.join(scratch, 'latin-1');
    mkdirSync(source);
    writeFileSync(path.join(source, 'ok.txt'), 'fine');
    const latin1 = latin1Name(source, 'caf', '.txt');
    writeFileSync(latin1, 'caf\u00e9');
    symlinkSync(latin1, path.join(source, 'link'));
    const home = path.join(scratch, 'latin-1-home');
    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      await engine.loginLocal({ dataDir: path.join(scratch, 'latin-1-data') });
      await engine.createBucket({ name: 'Latin', type: 'backup', storageClass: 'hot' });
      const result = await engine.backup({ dir: source, bucket: 'Latin' });
      expect(result.files).toBe(1);
      expect(result.skipped).toEqual([
        {
          path: 'caf\uFFFD.txt',
          reason:
            'its name is not valid UTF-8, which a backup cannot store; rename it to back it up',
          kind: 'unreadable',
        },
        {
          path: 'link',
          reason:
            'its target is not valid UTF-8, which a backup cannot store; link it again to back it up',
          kind: 'unreadable',
        },
      ]);
      expect((await engine.ls({ bucket: 'Latin' })).map((entry) => entry.name)).toEqual(['ok.txt']);
    } finally {
      await engine.close();
    }
  });

  it('skips a socket, a named pipe and a device with a reason, in a dry run and a backup, and backs up the rest', async () => {
    const source = path.join(scratch, 'specials');
    mkdirSync(path.join(source, 'run'), { recursive: true });
    writeFileSync(path.join(source, 'notes.txt'), 'kept');
    const socket = createServer();
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.listen(path.join(source, 'run', 'agent.sock'), resolve);
    });
    const home = path.join(scratch, 'specials-home');
    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      for (const [command, args] of [
        ['mkfifo', [path.join(source, 'run', 'queue')]],
        // As root, which the tests run as: the null device's numbers, as a disk image holds them.
        ['mknod', [path.join(source, 'null'), 'c', '1', '3']],
      ] as const) {
        const made = spawnSync(command, args, { encoding: 'utf8' });
        expect(made.status, made.stderr).toBe(0);
      }
      const skipped = [
        { path: 'null', reason: 'device (not backed up)', kind: 'special' },
        { path: 'run/agent.sock', reason: 'socket (not backed up)', kind: 'special' },
        { path: 'run/queue', reason: 'named pipe (not backed up)', kind: 'special' },
      ];
      const plan = await engine.planBackup({ dir: source });
      expect(plan.files).toBe(1);
      expect(plan.skipped).toEqual(skipped);
      await engine.loginLocal({ dataDir: path.join(scratch, 'specials-data') });
      await engine.createBucket({ name: 'Specials', type: 'backup', storageClass: 'hot' });
      const result = await engine.backup({ dir: source, bucket: 'Specials' });
      expect(result.files).toBe(1);
      expect(result.skipped).toEqual(skipped);
      expect((await engine.ls({ bucket: 'Specials' })).map((entry) => entry.name)).toEqual([
        'notes.txt',
        'run',
      ]);
      expect(await engine.ls({ bucket: 'Specials', path: 'run' })).toEqual([]);
    } finally {
      await engine.close();
      await new Promise((resolve) => socket.close(resolve));
    }
  });

  it('exits 3 when the version lacks items it could not read, and 0 for pipes and files renamed since', async () => {
    const source = path.join(scratch, 'exit-status');
    mkdirSync(source);
    writeFileSync(path.join(source, 'ok.txt'), 'fine');
    const latin1 = latin1Name(source, 'r', 'sum');
    writeFileSync(latin1, 'cv');
    const made = spawnSync('mkfifo', [path.join(source, 'queue')], { encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    const home = path.join(scratch, 'exit-status-home');
    await loginWithBucket(home, path.join(scratch, 'exit-status-data'), 'Exit');

    const incomplete = await runCanopy(home, ['backup', source, '--bucket', 'Exit'], fileStore);
    expect(incomplete.status).toBe(3);
    expect(incomplete.stdout).toContain(
      'skipped r\uFFFDsum: its name is not valid UTF-8, which a backup cannot store; rename it to back it up\n',
    );
    expect(incomplete.stderr).toBe(
      'canopy: 1 item could not be read (listed in the output) and is not in the version; everything else is\n',
    );
    // Stored all the same.
    const listed = await runCanopy(home, ['ls', '--bucket', 'Exit', '--json'], fileStore);
    expect((JSON.parse(listed.stdout) as { name: string }[]).map((entry) => entry.name)).toEqual([
      'ok.txt',
    ]);

    // Renamed, it is backed up; the pipe is never, and is no reason for a failing status.
    renameSync(latin1, path.join(source, 'resume'));
    const whole = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Exit', '--json'],
      fileStore,
    );
    expect(whole.status, whole.stderr).toBe(0);
    expect((JSON.parse(whole.stdout) as { skipped: unknown[] }).skipped).toEqual([
      { path: 'queue', reason: 'named pipe (not backed up)', kind: 'special' },
    ]);
  });

  it('skips a file the disk fails to read part way (an I/O error), sends none of what it read, backs up the rest, and picks it up once it reads', async () => {
    const source = path.join(scratch, 'damaged-sectors');
    mkdirSync(source);
    // Six chunks and a bit: read on at most four hashing threads, some thread reads two.
    const large = randomBytes(6 * 1024 * 1024 + 5);
    writeSettled(path.join(source, 'original.bin'), large);
    writeSettled(path.join(source, 'ok.txt'), 'fine');
    const home = path.join(scratch, 'damaged-sectors-home');
    await loginWithBucket(home, path.join(scratch, 'damaged-sectors-data'), 'Sectors');
    const first = await runCanopy(home, ['backup', source, '--bucket', 'Sectors'], fileStore);
    expect(first.status, first.stderr).toBe(0);
    // A new file then fails part way: strace fails every read of that file after the first
    // each thread makes (its count is per thread), as a damaged sector past the file's start
    // would. The chunks read before the failure belong to no file of the version: none is
    // sent.
    const video = randomBytes(6 * 1024 * 1024 + 5);
    writeSettled(path.join(source, 'video.mp4'), video);
    writeSettled(path.join(source, 'notes.txt'), 'new notes');
    const damaged = backupWithReadsFailing(home, source, 'Sectors', 'video.mp4', 'EIO:when=2+');
    expect(damaged.status, damaged.stderr).toBe(3);
    const reason = 'the disk could not read it (an I/O error: the disk may be failing)';
    expect(damaged.stdout).toContain(`skipped video.mp4: ${reason}\n`);
    // Of all it read, only the notes are new to the version, and sent.
    expect(damaged.stdout).toMatch(/\b9 B new, \d{3} B uploaded /);
    expect(damaged.stderr).toBe(
      'canopy: 1 item could not be read (listed in the output) and is not in the version; everything else is\n',
    );
    const listed = await runCanopy(home, ['ls', '--bucket', 'Sectors', '--json'], fileStore);
    expect((JSON.parse(listed.stdout) as { name: string }[]).map((entry) => entry.name)).toEqual([
      'notes.txt',
      'ok.txt',
      'original.bin',
    ]);
    // Read whole again, it is backed up, and restores byte for byte.
    const whole = await runCanopy(home, ['backup', source, '--bucket', 'Sectors'], fileStore);
    expect(whole.status, whole.stderr).toBe(0);
    const target = path.join(scratch, 'damaged-sectors-restored');
    const restored = await runCanopy(
      home,
      ['restore', '--bucket', 'Sectors', 'video.mp4', '--to', target],
      fileStore,
    );
    expect(restored.status, restored.stderr).toBe(0);
    expect(readFileSync(path.join(target, 'video.mp4')).equals(video)).toBe(true);
  });

  it('stops, making no version, when the network share it reads answers that its host is down', async () => {
    // A folder on an SMB share (cifs) whose server went away: every file then fails with
    // EHOSTDOWN. Taken one by one for unreadable files, they would all be left out of a version
    // that becomes the active one. strace answers so to the reads of one file.
    const source = path.join(scratch, 'share-down');
    mkdirSync(source);
    writeSettled(path.join(source, 'minutes.txt'), 'the meeting');
    const home = path.join(scratch, 'share-down-home');
    await loginWithBucket(home, path.join(scratch, 'share-down-data'), 'Share');
    const first = await runCanopy(home, ['backup', source, '--bucket', 'Share'], fileStore);
    expect(first.status, first.stderr).toBe(0);
    writeSettled(path.join(source, 'budget.ods'), 'the numbers');
    const down = backupWithReadsFailing(home, source, 'Share', 'budget.ods', 'EHOSTDOWN');
    expect(down.status, down.stdout).toBe(1);
    expect(down.stderr).toBe(
      `canopy: the disk holding ${source} stopped answering during the backup (EHOSTDOWN): connect it, or check it for errors, and run the backup again\n`,
    );
    const versions = await runCanopy(home, ['versions', '--bucket', 'Share', '--json'], fileStore);
    expect(JSON.parse(versions.stdout)).toHaveLength(1);

    const back = await runCanopy(home, ['backup', source, '--bucket', 'Share'], fileStore);
    expect(back.status, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/^2 files \(1 unchanged/m);
  });

  it('reports a full backup disk clearly, keeps nothing half-written, and finishes the upload once space is free', async () => {
    const source = path.join(scratch, 'big-source');
    mkdirSync(source);
    for (let i = 0; i < 3; i += 1)
      writeSettled(path.join(source, `part-${i}.bin`), randomBytes(4 << 20));
    const home = path.join(scratch, 'tmpfs-home');
    mkdirSync(home);
    // The embedded service keeps its blocks on a disk with 6 MiB for 12 MiB of data, like a
    // nearly full external drive.
    const localData = mountTmpfs('small-backup-disk', '6m');
    await loginWithBucket(home, localData, 'Big');
    const full = await runCanopy(home, ['backup', source, '--bucket', 'Big'], fileStore);
    expect(full.status).toBe(1);
    expect(full.stderr).toBe(
      `canopy: the disk holding the backups (${localData}) is full (the backups leave 1 % of it, at most 1 GiB, free for other files): free some space on it, then run the backup again; what it stored before stays\n`,
    );
    // Blocks that did not fit left no partial file, and no shard was staged on the local disk:
    // the home keeps the queued upload's metadata CAR (and the index of its nodes) alone, for
    // the run that finishes it.
    expect(readdirSync(path.join(localData, 'staging'))).toEqual([]);
    expect(
      stagedLeftovers(home)
        .map((name) => name.replace(/^\d+-[0-9a-f-]{36}/, 'CAR'))
        .sort(),
    ).toEqual(['CAR', 'CAR.nodes']);
    const versions = await runCanopy(home, ['versions', '--bucket', 'Big'], fileStore);
    expect(versions.stdout).toMatch(/ pending /);
    expect(versions.stdout).not.toMatch(/ active /);

    const remounted = spawnSync('mount', ['-o', 'remount,size=64m', localData], {
      encoding: 'utf8',
    });
    expect(remounted.status, remounted.stderr).toBe(0);
    const ok = await runCanopy(home, ['backup', source, '--bucket', 'Big'], fileStore);
    expect(ok.status).toBe(0);
    expect(ok.stdout).toMatch(/^finished the interrupted upload of version /m);
    expect(stagedLeftovers(home)).toEqual([]);
    // The files the failed run read are known as that version's: none is read again.
    expect(ok.stdout).toMatch(
      /^3 files \(3 unchanged, not read again\), 13 MB scanned, 0 B read, /m,
    );
    const target = path.join(scratch, 'big-restored');
    expect(
      (await runCanopy(home, ['restore', '--bucket', 'Big', '--to', target], fileStore)).status,
    ).toBe(0);
    for (let i = 0; i < 3; i += 1) {
      expect(
        readFileSync(path.join(target, `part-${i}.bin`)).equals(
          readFileSync(path.join(source, `part-${i}.bin`)),
        ),
      ).toBe(true);
    }
  });

  it('restores and verifies from a backup disk that is full to the last byte', async () => {
    const source = path.join(scratch, 'full-disk-source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'photo.jpg'), randomBytes(3 << 20));
    writeFileSync(path.join(source, 'notes.txt'), 'notes');
    const home = path.join(scratch, 'full-disk-home');
    mkdirSync(home);
    const localData = mountTmpfs('full-backup-disk', '16m');
    await loginWithBucket(home, localData, 'Full');
    expect((await runCanopy(home, ['backup', source, '--bucket', 'Full'], fileStore)).status).toBe(
      0,
    );
    // An upload killed while it named a stored block left a pin (server/store/block-sets.ts),
    // which the next lone start of the service lifts: with no room to, it serves all the same.
    const serviceDb = new Database(path.join(localData, 'service.sqlite'));
    serviceDb
      .prepare('INSERT INTO upload_pins (upload, cid) VALUES (?, ?)')
      .run(randomUUID(), cidText(await rawCidOf(Buffer.from('notes'))));
    serviceDb.close();
    // Something else takes every last byte of the disk.
    const free = statfsSync(localData);
    writeFileSync(path.join(localData, 'filler'), Buffer.alloc(free.bavail * free.bsize));
    expect(statfsSync(localData).bavail).toBe(0);

    const target = path.join(scratch, 'from-full-disk');
    const restored = await runCanopy(
      home,
      ['restore', '--bucket', 'Full', '--to', target],
      fileStore,
    );
    expect(restored.stderr).toBe('');
    expect(
      readFileSync(path.join(target, 'photo.jpg')).equals(
        readFileSync(path.join(source, 'photo.jpg')),
      ),
    ).toBe(true);
    const verified = await runCanopy(home, ['verify', '--bucket', 'Full', '--all'], fileStore);
    expect(verified.stdout).toMatch(/^verified 4 of 4 blocks .*: restorable as of /);
    // A change has no room: said so clearly.
    writeFileSync(path.join(source, 'notes.txt'), 'more notes');
    const full = await runCanopy(home, ['backup', source, '--bucket', 'Full'], fileStore);
    expect(full.stderr).toBe(
      `canopy: the disk holding the backups (${localData}) is full (the backups leave 1 % of it, at most 1 GiB, free for other files): free some space on it, then run the backup again; what it stored before stays\n`,
    );
  });

  it('skips what lies deeper than a path can reach, saying why, and backs up the rest', async () => {
    const source = path.join(scratch, 'deep-source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'shallow.txt'), 'near the top');
    // 45 folders of 100-byte names: 4 500 bytes, past Linux's PATH_MAX. Made a folder at a
    // time from inside the one before, as a test worker cannot (it may not change folders).
    const deepen = spawnSync(
      'python3',
      [
        '-c',
        `import os, sys
os.chdir(sys.argv[1])
for i in range(10, 55):
    name = "d%d_%s" % (i, "0" * 96)
    os.mkdir(name)
    os.chdir(name)
open("deep.txt", "w").write("deep")`,
        source,
      ],
      { encoding: 'utf8' },
    );
    expect(deepen.status, deepen.stderr).toBe(0);
    const home = path.join(scratch, 'deep-home');
    await loginWithBucket(home, path.join(scratch, 'deep-disk'), 'Deep');
    const backup = await runCanopy(home, ['backup', source, '--bucket', 'Deep'], fileStore);
    expect(backup.status).toBe(3);
    const skipped = backup.stdout.split('\n').filter((line) => line.startsWith('skipped '));
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toMatch(
      /^skipped d10_0+\/.*\/d50_0+: its path is longer than the system lets a program open \(4 096 bytes on Linux\); move it to a folder nearer the top to back it up$/,
    );
    const listed = await runCanopy(home, ['ls', '--bucket', 'Deep'], fileStore);
    expect(listed.stdout).toContain('shallow.txt');
    // Node's rmSync cannot reach that deep; rm works its way down folder by folder.
    const removed = spawnSync('rm', ['-rf', source], { encoding: 'utf8' });
    expect(removed.status, removed.stderr).toBe(0);
  });

  /**
   * A folder with a photo of `photoBytes` random bytes and a note, and a home logged in to its
   * own local service with a bucket named `bucket`.
   */
  async function photoFolder(name: string, photoBytes: number, bucket: string) {
    const source = path.join(scratch, `${name}-source`);
    mkdirSync(source);
    const photo = randomBytes(photoBytes);
    writeFileSync(path.join(source, 'photo.jpg'), photo);
    writeFileSync(path.join(source, 'notes.txt'), 'notes');
    const home = path.join(scratch, `${name}-home`);
    const localData = path.join(scratch, `${name}-disk`);
    await loginWithBucket(home, localData, bucket);
    return { source, home, localData, photo };
  }

  /** The local service on `localData` loses its block of `bytes`, as if its disk lost it. */
  async function loseBlock(localData: string, bytes: Uint8Array): Promise<string> {
    const lost = cidText(await rawCidOf(bytes));
    const db = new Database(path.join(localData, 'service.sqlite'));
    try {
      expect(db.prepare('DELETE FROM blocks WHERE cid = ?').run(lost).changes).toBe(1);
    } finally {
      db.close();
    }
    return lost;
  }

  it('names the files a lost block takes from a version when verifying, exits 1, and the next backup sends it again', async () => {
    const { source, home, localData, photo } = await photoFolder('lost-block', 2 << 20, 'Photos');
    expect(
      (await runCanopy(home, ['backup', source, '--bucket', 'Photos'], fileStore)).status,
    ).toBe(0);
    // The backup disk loses the photo's second chunk.
    const lost = await loseBlock(localData, photo.subarray(1 << 20));
    const verified = await runCanopy(home, ['verify', '--bucket', 'Photos', '--all'], fileStore);
    expect(verified.status).toBe(1);
    const lines = verified.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^checked 3 of 3 blocks of version [0-9a-f-]{36}: 1 did not come back whole, so it is not restorable in full as of \d{4}-/,
    );
    expect(lines.slice(1)).toEqual([
      `cannot restore photo.jpg: the server no longer holds block ${lost}`,
    ]);
    expect(verified.stderr).toBe(
      'canopy: 1 file of this version cannot be restored (listed in the output); the next backup of this bucket sends again what its folder still holds of it\n',
    );
    const partial = await runCanopy(
      home,
      ['restore', '--bucket', 'Photos', '--to', path.join(scratch, 'lost-block-restored')],
      fileStore,
    );
    expect(partial.status).toBe(1);
    expect(partial.stdout).toContain(
      `could not restore photo.jpg: the server no longer holds block ${lost}`,
    );
    expect(partial.stderr).toBe(
      'canopy: 1 item could not be restored (listed in the output); everything else is in place; the next backup of Photos sends again what its folder still holds of the blocks that did not come back whole\n',
    );
    // The source has not changed, and the next backup sends the block again all the same.
    const healed = await runCanopy(home, ['backup', source, '--bucket', 'Photos'], fileStore);
    expect(healed.status, healed.stderr).toBe(0);
    expect(healed.stdout).toContain('\nsent again 1 block the server could not give back whole\n');
    const whole = await runCanopy(home, ['verify', '--bucket', 'Photos', '--all'], fileStore);
    expect(whole.status, whole.stderr).toBe(0);
    expect(whole.stdout).toMatch(/^verified 3 of 3 blocks .*: restorable as of /);
  });

  it('checks random blocks once a backup is stored, names one that is lost and exits 3, and the next backup sends it again', async () => {
    const { source, home, localData, photo } = await photoFolder('checked', 1 << 20, 'Checked');
    const first = await runCanopy(home, ['backup', source, '--bucket', 'Checked'], fileStore);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toMatch(
      new RegExp(
        `\\nfetched 2 random blocks of it again, each whole: restorable as of ${TOLD_TIME}\\n`,
      ),
    );
    // The backup disk loses the photo's only chunk.
    await loseBlock(localData, photo);
    const unchecked = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Checked', '--skip-check'],
      fileStore,
    );
    expect(unchecked.stdout).not.toContain('random block');
    const found = await runCanopy(home, ['backup', source, '--bucket', 'Checked'], fileStore);
    // Stored, but the bucket is not whole: a script run by a timer sees it.
    expect(found.status, found.stderr).toBe(3);
    expect(found.stdout).toContain(
      '\nfetched 2 random blocks of it again: 1 did not come back whole; the next backup sends again what this folder still holds of it\n',
    );
    expect(found.stderr).toBe(
      'canopy: 1 block of bucket "Checked" did not come back whole (see the output); `canopy verify --bucket Checked --all` names the files that need it\n',
    );
    const healed = await runCanopy(home, ['backup', source, '--bucket', 'Checked'], fileStore);
    expect(healed.stderr).toBe('');
    expect(healed.status).toBe(0);
    expect(healed.stdout).toContain('\nsent again 1 block the server could not give back whole\n');
    expect(healed.stdout).toMatch(/\nfetched 2 random blocks of it again, each whole: /);
  });

  it('stores a version in place of one whose metadata verify finds damaged on the server, though nothing changed', async () => {
    const { source, home, localData, photo } = await photoFolder('metadata', 5000, 'Meta');
    const first = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Meta', '--json'],
      fileStore,
    );
    expect(first.status, first.stderr).toBe(0);
    const damaged = (JSON.parse(first.stdout) as { versionId: string }).versionId;
    // A byte of the version's metadata CAR goes bad on the backup disk.
    damageStoredCar(localData, damaged);

    const verified = await runCanopy(home, ['verify', '--bucket', 'Meta'], fileStore);
    expect(verified.status).toBe(1);
    expect(verified.stderr).toMatch(
      new RegExp(
        `^canopy: the metadata of version ${damaged} is damaged on the server \\(.+\\): the next backup of its folder stores a version in its place\n$`,
      ),
    );
    const again = await runCanopy(home, ['backup', source, '--bucket', 'Meta'], fileStore);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toContain(
      '\nit takes the place of the version before it, whose metadata is damaged on the server\n',
    );
    expect(again.stdout).not.toContain(damaged);
    const whole = await runCanopy(home, ['verify', '--bucket', 'Meta', '--all'], fileStore);
    expect(whole.status, whole.stderr).toBe(0);
    // Another device, with no copy of its own, restores it from the server.
    rmSync(path.join(home, 'metadata'), { recursive: true, force: true });
    const target = path.join(scratch, 'metadata-restored');
    const restored = await runCanopy(
      home,
      ['restore', '--bucket', 'Meta', '--to', target],
      fileStore,
    );
    expect(restored.status, restored.stderr).toBe(0);
    expect(readFileSync(path.join(target, 'photo.jpg')).equals(photo)).toBe(true);
    // Stored once: the backup after finds nothing changed.
    const third = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Meta', '--json'],
      fileStore,
    );
    const stored = JSON.parse(third.stdout) as { versionId: string; unchanged: boolean };
    expect(stored.unchanged).toBe(true);

    // Damaged again, and a device that keeps no copy of it backs the folder up: it reads every
    // file, sends none, and stores a version in place of that one all the same.
    damageStoredCar(localData, stored.versionId);
    const other = path.join(scratch, 'metadata-other-home');
    const login = await runCanopy(other, ['login', '--local', '--data', localData], fileStore);
    expect(login.status, login.stderr).toBe(0);
    const fresh = await runCanopy(other, ['backup', source, '--bucket', 'Meta'], fileStore);
    expect(fresh.status, fresh.stderr).toBe(0);
    expect(fresh.stdout).toContain('2 files (0 unchanged, not read again)');
    // No data sent, but the version's tree was: the line says so.
    expect(fresh.stdout).toMatch(
      / 0 B uploaded \(and [1-9][\d.]* [kM]?B of metadata: the names, sizes and times of all the files\) in /,
    );
    expect(fresh.stdout).toContain('\nit takes the place of the version before it');
    const sound = await runCanopy(other, ['verify', '--bucket', 'Meta', '--all'], fileStore);
    expect(sound.status, sound.stderr).toBe(0);
  });

  it('reports a full disk under the Canopy home clearly, loses neither version nor file index, and backs up once space is free', async () => {
    const source = path.join(scratch, 'home-source');
    // Settled: a file modified within seconds of a backup is read again by the next one
    // whatever the index says, and the login before the first backup may take less.
    const addFiles = (folder: string): void => {
      for (let d = 0; d < 10; d += 1)
        for (let i = 0; i < 100; i += 1)
          writeSettled(path.join(source, folder, `d${d}`, `note-${i}.txt`), `${folder} ${d} ${i}`);
    };
    addFiles('first');
    // The home (state database, staging, metadata cache) is on a small disk of its own; the
    // embedded service keeps its blocks elsewhere.
    const home = mountTmpfs('small-home-disk', '16m');
    const localData = path.join(scratch, 'home-disk-data');
    await loginWithBucket(home, localData, 'Notes');
    const first = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Notes', '--json'],
      fileStore,
    );
    expect(first.stderr).toBe('');
    const firstVersion = (JSON.parse(first.stdout) as { versionId: string }).versionId;

    // Something else fills the disk, and the source has grown: the next backup's state and
    // metadata no longer fit.
    addFiles('second');
    /** Leaves `left` bytes free on the home's disk. */
    const fill = (name: string, left = 64 << 10): void => {
      const free = statfsSync(home);
      writeFileSync(
        path.join(home, name),
        Buffer.alloc(Math.max(0, free.bavail * free.bsize - left)),
      );
    };
    fill('filler');
    const full = await runCanopy(home, ['backup', source, '--bucket', 'Notes'], fileStore);
    expect(full.stderr).toBe(
      `canopy: not enough free space in ${home}, where Canopy keeps its state; free some space and run it again\n`,
    );
    expect(full.status).toBe(1);
    expect(stagedLeftovers(home)).toEqual([]);
    expect(cachedFilesOf(home)).toEqual([`${firstVersion}.car`, `${firstVersion}.car.nodes`]);
    const versions = await runCanopy(home, ['versions', '--bucket', 'Notes'], fileStore);
    expect(versions.stdout).toMatch(new RegExp(`^${firstVersion} .* active `, 'm'));

    // Browsing a version missing from the local cache pulls it and caches it: no room for it
    // either, and no half-written copy left behind.
    for (const cached of readdirSync(path.join(home, 'metadata')))
      rmSync(path.join(home, 'metadata', cached));
    fill('more-filler');
    const browse = await runCanopy(home, ['ls', '--bucket', 'Notes'], fileStore);
    expect(browse.stderr).toBe(full.stderr);
    expect(cachedFilesOf(home)).toEqual([]);
    expect(readdirSync(path.join(home, 'staging'))).toEqual([]);
    // Not a byte left: the state database cannot even open (no room for its WAL index).
    fill('last-filler', 0);
    const listed = await runCanopy(home, ['versions', '--bucket', 'Notes'], fileStore);
    expect(listed.stderr).toBe(full.stderr);

    for (const filler of ['filler', 'more-filler', 'last-filler']) rmSync(path.join(home, filler));
    const next = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Notes', '--json'],
      fileStore,
    );
    expect(next.stderr).toBe('');
    // The file index of the first backup survived: its files were not read again.
    expect(JSON.parse(next.stdout)).toMatchObject({ files: 2000, filesUnchanged: 1000 });
    const target = path.join(scratch, 'home-disk-restored');
    expect(
      (await runCanopy(home, ['restore', '--bucket', 'Notes', '--to', target], fileStore)).status,
    ).toBe(0);
    expect(readFileSync(path.join(target, 'second', 'd9', 'note-99.txt'), 'utf8')).toBe(
      'second 9 99',
    );
    expect(readdirSync(target, { recursive: true })).toHaveLength(
      readdirSync(source, { recursive: true }).length,
    );
  });

  it("tells a home disk that fails to write Canopy's state, keeps what it recorded before, and backs up once it writes", async () => {
    const {
      home,
      source,
      versionId: firstVersion,
    } = await localHomeBackedUp(path.join(scratch, 'failing-home'), 'Plans', {
      'plan.txt': 'the first plan',
    });

    // The home's disk starts failing: every fsync of the state database fails (EIO), as on a
    // disk with bad sectors or one pulled out.
    writeSettled(path.join(source, 'budget.txt'), 'the budget');
    const state = path.join(home, 'state.sqlite');
    const backup = ['backup', source, '--bucket', 'Plans', '--skip-check'];
    const failing = canopyWithCallsFailing(home, backup, 'fsync,fdatasync', 'EIO', [
      state,
      `${state}-wal`,
    ]);
    expect(failing.stderr).toBe(
      `canopy: the disk holding ${home}, where Canopy keeps its state, failed a read or write (SQLITE_IOERR_FSYNC): the disk may be failing; check it for errors, and run this again\n`,
    );
    expect(failing.status).toBe(1);
    const json = canopyWithCallsFailing(home, [...backup, '--json'], 'fsync,fdatasync', 'EIO', [
      state,
      `${state}-wal`,
    ]);
    expect(JSON.parse(json.stderr)).toMatchObject({
      error: { code: 'disk_unavailable', retryable: false },
    });
    const versions = await runCanopy(home, ['versions', '--bucket', 'Plans'], fileStore);
    expect(versions.stdout).toMatch(new RegExp(`^${firstVersion} .* active `, 'm'));

    // Once it writes again, the backup goes through, and its file index was kept: the file
    // backed up before is not read again.
    const next = await runCanopy(home, [...backup, '--json'], fileStore);
    expect(next.stderr).toBe('');
    expect(JSON.parse(next.stdout)).toMatchObject({ files: 2, filesUnchanged: 1 });
    const target = path.join(scratch, 'failing-home-restored');
    expect(
      (await runCanopy(home, ['restore', '--bucket', 'Plans', '--to', target], fileStore)).status,
    ).toBe(0);
    expect(readFileSync(path.join(target, 'plan.txt'), 'utf8')).toBe('the first plan');
    expect(readFileSync(path.join(target, 'budget.txt'), 'utf8')).toBe('the budget');
  });

  it("tells a home disk that fails to read a version's kept list of files, and browses it once it reads", async () => {
    const { home, versionId } = await localHomeBackedUp(
      path.join(scratch, 'unreadable-copy'),
      'Letters',
      { 'letter.txt': 'dear Ann' },
    );
    const copy = path.join(home, 'metadata', `${versionId}.car`);
    expect(cachedFilesOf(home)).toEqual([`${versionId}.car`, `${versionId}.car.nodes`]);

    // Every read of the kept copy fails (EIO), the copy pulled again in its place too.
    const failing = canopyWithCallsFailing(
      home,
      ['ls', '--bucket', 'Letters'],
      'read,pread64',
      'EIO',
      [copy, `${copy}.nodes`],
    );
    expect(failing.stderr).toBe(
      `canopy: the disk holding ${home}, where Canopy keeps its state, failed a read or write (EIO): the disk may be failing; check it for errors, and run this again\n`,
    );
    expect(failing.status).toBe(1);
    // Nothing unreadable is kept for the next browse to trip on.
    expect(cachedFilesOf(home)).toEqual([]);

    const listed = await runCanopy(home, ['ls', '--bucket', 'Letters'], fileStore);
    expect(listed.stderr).toBe('');
    expect(listed.stdout).toContain('letter.txt');
    expect(cachedFilesOf(home)).toEqual([`${versionId}.car`, `${versionId}.car.nodes`]);
  });

  it('tells a backup disk that fails to write as failing, keeps what it stored before, and backs up once it writes', async () => {
    const {
      home,
      source,
      data: dataDir,
    } = await localHomeBackedUp(path.join(scratch, 'failing-backups'), 'Photos', {
      'photo.raw': randomBytes(300_000),
    });
    const backup = ['backup', source, '--bucket', 'Photos', '--skip-check'];

    // The external disk the backups are on starts failing: every fsync of the embedded
    // service's database fails (EIO).
    writeSettled(path.join(source, 'second.raw'), randomBytes(300_000));
    const database = path.join(dataDir, 'service.sqlite');
    const failing = canopyWithCallsFailing(home, backup, 'fsync,fdatasync', 'EIO', [
      database,
      `${database}-wal`,
    ]);
    expect(failing.stderr).toBe(
      `canopy: the disk holding the backups (${dataDir}) failed to read or write them (an I/O error): the disk may be failing; check it for errors, and run this again\n`,
    );
    expect(failing.status).toBe(1);

    const next = await runCanopy(home, [...backup, '--json'], fileStore);
    expect(next.stderr).toBe('');
    expect(JSON.parse(next.stdout)).toMatchObject({ files: 2, filesUnchanged: 1 });
    const target = path.join(scratch, 'failing-backups-restored');
    expect(
      (await runCanopy(home, ['restore', '--bucket', 'Photos', '--to', target], fileStore)).status,
    ).toBe(0);
    for (const name of ['photo.raw', 'second.raw'])
      expect(
        readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
      ).toBe(true);
  });

  it('lists the versions from a home disk too full to keep the list, and says it could not keep it', async () => {
    // Engine-level: the engine holds its database open while something else takes the disk's
    // last byte, so the list comes back from the service and only remembering it has no room.
    const home = mountTmpfs('full-home-listing', '16m');
    const source = path.join(scratch, 'listing-source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'note.txt'), 'kept\n');
    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      await engine.loginLocal({ dataDir: path.join(scratch, 'listing-data') });
      await engine.createBucket({ name: 'Listed', type: 'backup', storageClass: 'hot' });
      const { versionId } = await engine.backup({ dir: source, bucket: 'Listed' });
      const free = statfsSync(home);
      writeFileSync(path.join(home, 'filler'), Buffer.alloc(free.bavail * free.bsize));
      const listed = await engine.versionsOrLastSeen({ bucket: 'Listed' });
      expect(listed.versions.map((version) => [version.id, version.state])).toEqual([
        [versionId, 'active'],
      ]);
      expect(listed.keptForOffline).toBe(false);
      rmSync(path.join(home, 'filler'));
      expect((await engine.versionsOrLastSeen({ bucket: 'Listed' })).keptForOffline).toBe(true);
    } finally {
      await engine.close();
    }
  });

  it('deletes a bucket from a home disk too full to forget it, and forgets it once space is free', async () => {
    const home = mountTmpfs('full-home-delete', '16m');
    const source = path.join(scratch, 'delete-source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'note.txt'), 'kept\n');
    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      await engine.loginLocal({ dataDir: path.join(scratch, 'delete-data') });
      const { id } = await engine.createBucket({
        name: 'Doomed',
        type: 'backup',
        storageClass: 'hot',
      });
      /** The bucket's file index in the state database, read beside the engine. */
      const indexedSources = (): number => keptRowsOf(home, id).fileIndex;
      const { versionId } = await engine.backup({ dir: source, bucket: 'Doomed' });
      expect(indexedSources()).toBe(1);
      const free = statfsSync(home);
      writeFileSync(path.join(home, 'filler'), Buffer.alloc(free.bavail * free.bsize));

      await engine.deleteBucket({ name: 'Doomed' });
      expect(await engine.listBuckets()).toEqual([]);
      // No room to forget it here: its file index and list of files stay for now.
      expect(indexedSources()).toBe(1);
      expect(readdirSync(path.join(home, 'metadata'))).toContain(`${versionId}.car`);

      rmSync(path.join(home, 'filler'));
      expect(await engine.listBuckets()).toEqual([]);
      expect(indexedSources()).toBe(0);
      expect(cachedFilesOf(home)).toEqual([]);
    } finally {
      await engine.close();
    }
  });

  it('refuses a restore too large for a new folder before it starts, and tells a disk filling part way, keeping whole the files it wrote and no half-written one', async () => {
    const source = path.join(scratch, 'restore-source');
    // Small files that fit, then a large file that does not, then small ones that wait for its
    // leaves to be taken: when the disk fills under it, they must fail too rather than wait
    // forever. The first ones are whole before it fills, and keep their names.
    mkdirSync(path.join(source, 'a-first'), { recursive: true });
    mkdirSync(path.join(source, 'b-small'), { recursive: true });
    const first = Array.from({ length: 30 }, () => randomBytes(2000));
    for (const [i, bytes] of first.entries())
      writeFileSync(path.join(source, 'a-first', `note-${i}.txt`), bytes);
    writeFileSync(path.join(source, 'a-large.bin'), randomBytes(100 << 20));
    for (let i = 0; i < 30; i += 1)
      writeFileSync(path.join(source, 'b-small', `note-${i}.txt`), randomBytes(2000));
    const home = path.join(scratch, 'restore-home');
    mkdirSync(home);
    const localData = path.join(scratch, 'restore-data');
    await loginWithBucket(home, localData, 'Docs');
    const backup = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], fileStore);
    expect(backup.status).toBe(0);
    const target = mountTmpfs('small-disk', '16m');
    // Into an empty folder, a restore larger than its disk's room is refused before it starts.
    const refused = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--to', path.join(target, 'docs')],
      fileStore,
    );
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(
      `canopy: not enough free space in ${path.join(target, 'docs')} to restore: its files hold 105 MB, and the disk has 17 MB free; nothing was restored. Free some space, restore to another disk, or restore a part of it (canopy restore PATH)\n`,
    );
    expect(readdirSync(target)).toEqual([]);
    // A part of it that fits is restored.
    const part = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', 'b-small', '--to', path.join(target, 'docs')],
      fileStore,
    );
    expect(part.status, part.stderr).toBe(0);
    expect(readdirSync(path.join(target, 'docs', 'b-small'))).toHaveLength(30);
    // Into a folder holding other files, none of them of a name it restores, it is refused too.
    const beside = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--to', target],
      fileStore,
    );
    expect(beside.status).toBe(1);
    expect(beside.stderr).toMatch(
      /^canopy: not enough free space in \S+ to restore: its files hold 105 MB, and the disk has 17 MB free; nothing was restored\./,
    );
    expect(readdirSync(target)).toEqual(['docs']);
    // Into a folder holding some of what it restores, which it may leave as it is, it is tried,
    // and the disk fills part way.
    const full = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--to', path.join(target, 'docs')],
      fileStore,
    );
    expect(full.status).toBe(1);
    expect(full.stderr).toBe(
      `canopy: not enough free space in ${path.join(target, 'docs')} to restore; free some space and run it again\n`,
    );
    const leftovers = readdirSync(target, { recursive: true }).map(String);
    expect(leftovers.filter((name) => name.includes('.canopy-'))).toEqual([]);
    expect(leftovers).not.toContain(path.join('docs', 'a-large.bin'));
    for (const [i, bytes] of first.entries())
      expect(
        readFileSync(path.join(target, 'docs', 'a-first', `note-${i}.txt`)).equals(bytes),
      ).toBe(true);
    expect(readdirSync(path.join(target, 'docs', 'b-small'))).toHaveLength(30);
  });

  it('suggests --sparse when a disk image does not fit, and then restores it in the room its data takes', async () => {
    const source = path.join(scratch, 'image-source');
    mkdirSync(source);
    // 32 MiB, of which 1 MiB holds data: a virtual machine's disk, say.
    const image = path.join(source, 'vm.img');
    writeSparseFile(image, 32 << 20, randomBytes(1 << 20), 7 << 20);
    const home = path.join(scratch, 'image-home');
    await loginWithBucket(home, path.join(scratch, 'image-data'), 'Images');
    expect(
      (await runCanopy(home, ['backup', source, '--bucket', 'Images'], fileStore)).status,
    ).toBe(0);
    const target = mountTmpfs('image-disk', '8m');
    const full = await runCanopy(
      home,
      ['restore', '--bucket', 'Images', '--to', target],
      fileStore,
    );
    expect(full.status).toBe(1);
    expect(full.stderr).toBe(
      `canopy: not enough free space in ${target} to restore: its files hold 34 MB, and the disk has 8.4 MB free; nothing was restored. Free some space, restore to another disk, or restore a part of it (canopy restore PATH), or add --sparse to leave the runs of zeros in its files (disk images, for one) as holes that take no room\n`,
    );
    const sparse = await runCanopy(
      home,
      ['restore', '--bucket', 'Images', '--to', target, '--sparse'],
      fileStore,
    );
    expect(sparse.status, sparse.stderr).toBe(0);
    expect(readFileSync(path.join(target, 'vm.img')).equals(readFileSync(image))).toBe(true);
    expect(statfsSync(target).bfree * statfsSync(target).bsize).toBeGreaterThan(6 << 20);
  });

  it('refuses a restore of small files that fit in bytes but not in the blocks or inodes of the disk', async () => {
    const source = path.join(scratch, 'mail-source');
    // A mail folder: 300 messages of 2000 bytes, 600 kB, each taking a 4 KiB page on a tmpfs.
    for (let i = 0; i < 300; i += 1)
      writeSettled(path.join(source, 'inbox', `${i}.eml`), randomBytes(2000));
    const home = path.join(scratch, 'mail-home');
    await loginWithBucket(home, path.join(scratch, 'mail-data'), 'Mail');
    const backup = await runCanopy(home, ['backup', source, '--bucket', 'Mail'], fileStore);
    expect(backup.status, backup.stderr).toBe(0);
    const restore = (to: string, ...more: string[]) =>
      runCanopy(home, ['restore', '--bucket', 'Mail', ...more, '--to', to], fileStore);

    const smallBlocks = mountTmpfs('mail-blocks', '1m');
    const blocks = await restore(smallBlocks);
    expect(blocks.status).toBe(1);
    expect(blocks.stderr).toBe(
      `canopy: not enough free space in ${smallBlocks} to restore: its files hold 600 kB, which take 1.2 MB there, as the disk stores each file in whole blocks of 4 KiB, and it has 1.0 MB free; nothing was restored. Free some space, restore to another disk, or restore a part of it (canopy restore PATH)\n`,
    );
    expect(readdirSync(smallBlocks)).toEqual([]);

    // Room for the bytes and the blocks, not for the files: 301 inodes to make.
    const fewInodes = mountTmpfs('mail-inodes', '8m', 250);
    const inodes = await restore(path.join(fewInodes, 'mail'));
    expect(inodes.status).toBe(1);
    expect(inodes.stderr).toMatch(
      /: its 302 files, folders and links need an entry each \(an inode\), and the disk can make 249 more; nothing was restored\./,
    );
    expect(readdirSync(fewInodes)).toEqual([]);
    // Even a sparse restore needs an inode for each.
    expect((await restore(fewInodes, '--sparse')).stderr).toMatch(/and the disk can make 249 more/);

    // A disk with room for both takes it all.
    const roomy = mountTmpfs('mail-roomy', '2m', 400);
    const restored = await restore(roomy);
    expect(restored.status, restored.stderr).toBe(0);
    expect(readdirSync(path.join(roomy, 'inbox'))).toHaveLength(300);
  });
});
