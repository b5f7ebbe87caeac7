import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopySucceeds, loginWithBucket } from '../helpers/canopy-cli.ts';
import { fingerprintTree } from '../helpers/tree-fingerprint.ts';

// A folder lost and restored where it was backed up from, then backed up again, as a user
// recovering from a deleted folder or a new disk does: the backup reads none of the restored
// files while they are as the restore left them (each has a new inode, so the file index
// alone would have them all read again), and still reads every one changed or replaced since.
// So too for a whole version restored into another folder that the bucket backs up from then
// on, as on a new computer.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-backup-after-restore-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const MiB = 1024 * 1024;

interface BackupJson {
  versionId: string;
  files: number;
  bytesRead: number;
  newBytes: number;
  unchanged?: boolean;
}

async function backup(): Promise<BackupJson> {
  return JSON.parse(
    await canopySucceeds(home, 'backup', source, '--bucket', 'Docs', '--json', '--skip-check'),
  ) as BackupJson;
}

/**
 * Writes `bytes` to `name` in the source, dated an hour back (a file written in the last
 * seconds before a backup is always read again by the next one), to the nanosecond as a file
 * written has it, which Node cannot set: touch can.
 */
function writeOld(name: string, bytes: Uint8Array): void {
  const file = path.join(source, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, bytes);
  const anHourAgo = Math.floor(Date.now() / 1000) - 3600;
  execFileSync('touch', ['-d', `@${anHourAgo}.123456789`, file]);
}

/** The newest version, restored into a fresh folder, as a fingerprint of its tree. */
async function newestVersion(name: string): Promise<ReturnType<typeof fingerprintTree>> {
  const target = path.join(scratch, name);
  await canopySucceeds(home, 'restore', '--bucket', 'Docs', '--to', target);
  return fingerprintTree(target);
}

beforeAll(async () => {
  writeOld('photos/cat.jpg', randomBytes(2 * MiB + 3));
  writeOld('photos/2024/dog.jpg', randomBytes(MiB));
  writeOld('photos/empty', new Uint8Array());
  writeOld('notes.txt', randomBytes(700));
  // A link's own time, which a restore sets too (lutimes).
  symlinkSync('cat.jpg', path.join(source, 'photos', 'latest'));
  execFileSync('touch', [
    '-h',
    '-d',
    '@1700000000.000000777',
    path.join(source, 'photos', 'latest'),
  ]);
  await loginWithBucket(home, path.join(scratch, 'local'), 'Docs');
  expect(await backup()).toMatchObject({ files: 4, bytesRead: 3 * MiB + 703 });
}, 60_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a backup after a restore into the folder it backs up', () => {
  it('makes no version of a folder restored whole as it was, though a restore sets times only to the microsecond', async () => {
    const before = fingerprintTree(source);
    const [active] = JSON.parse(
      await canopySucceeds(home, 'versions', '--bucket', 'Docs', '--json'),
    ) as Array<{ id: string; state: string }>;
    expect(active?.state).toBe('active');
    const versionId = active?.id;
    expect(statSync(path.join(source, 'notes.txt'), { bigint: true }).mtimeNs % 1000n).toBe(789n);
    rmSync(source, { recursive: true });
    await canopySucceeds(home, 'restore', '--bucket', 'Docs', '--to', source);
    // Each file and folder is back a fraction of a microsecond off its time in the version.
    expect(statSync(path.join(source, 'notes.txt'), { bigint: true }).mtimeNs % 1000n).toBe(0n);
    expect(fingerprintTree(source)).toEqual(before);

    const after = await backup();
    expect(after).toMatchObject({ versionId, files: 4, bytesRead: 0, newBytes: 0 });
    // Taken into the file index with their times on disk: the next backup finds nothing changed.
    expect(await backup()).toMatchObject({ versionId, unchanged: true, bytesRead: 0 });
    // As a dry run tells first.
    expect(await canopySucceeds(home, 'backup', source, '--bucket', 'Docs', '--dry-run')).toContain(
      '\nof which it would read 0 files (0 B), those not backed up here before or changed since; the others are unchanged, and not read again\n',
    );
  });

  it('reads none of the files restored, and the version it makes holds them whole', async () => {
    rmSync(path.join(source, 'photos'), { recursive: true });
    const restored = JSON.parse(
      await canopySucceeds(home, 'restore', 'photos', '--bucket', 'Docs', '--json'),
    ) as { files: number; restoredInto: string; readAgainBecause: string | null };
    expect(restored).toMatchObject({ files: 3, restoredInto: source, readAgainBecause: null });

    const after = await backup();
    expect(after).toMatchObject({ files: 4, bytesRead: 0, newBytes: 0 });
    expect(after.unchanged).not.toBe(true);
    expect(await newestVersion('after-restore')).toEqual(fingerprintTree(source));
  });

  it('reads a restored file written to since, and one put in its place', async () => {
    rmSync(source, { recursive: true });
    mkdirSync(source);
    await canopySucceeds(home, 'restore', '--bucket', 'Docs', '--to', source);
    // Written to (dated back, or the next backup would read it again as just written).
    const notes = path.join(source, 'notes.txt');
    appendFileSync(notes, 'one more line');
    const aMinuteAgo = new Date(Date.now() - 60_000);
    utimesSync(notes, aMinuteAgo, aMinuteAgo);
    // Replaced by other bytes of the same size and mtime: only its inode tells.
    const cat = path.join(source, 'photos', 'cat.jpg');
    const { mtime } = statSync(cat);
    const other = path.join(scratch, 'other-cat.jpg');
    writeFileSync(other, randomBytes(2 * MiB + 3));
    utimesSync(other, mtime, mtime);
    renameSync(other, cat);

    const after = await backup();
    expect(after).toMatchObject({ files: 4, bytesRead: 2 * MiB + 3 + 713 });
    expect(await newestVersion('after-changes')).toEqual(fingerprintTree(source));
    // The restored files were taken into the file index: a backup of nothing changed reads
    // nothing and makes no version.
    expect(await backup()).toMatchObject({ unchanged: true, bytesRead: 0 });
  });

  it('reads none of a whole version restored into another folder, backed up from then on', async () => {
    // A new computer: the version restored where its user keeps the files now.
    const moved = path.join(scratch, 'new-computer', 'Documents');
    await canopySucceeds(home, 'restore', '--bucket', 'Docs', '--to', moved);
    const after = JSON.parse(
      await canopySucceeds(
        home,
        'backup',
        moved,
        '--bucket',
        'Docs',
        '--replace-source',
        '--json',
        '--skip-check',
      ),
    ) as BackupJson;
    expect(after).toMatchObject({ files: 4, bytesRead: 0, newBytes: 0 });
    expect(await newestVersion('new-computer-check')).toEqual(fingerprintTree(moved));
  });

  it('makes no version of a whole version restored on a new computer, where it was backed up from', async () => {
    // The computer's disk lost, and Canopy set up anew: a home of its own, the same backups.
    const moved = path.join(scratch, 'new-computer', 'Documents');
    // Times to the nanosecond, as files written have them, on a file, a folder and the top.
    const anHourAgo = Math.floor(Date.now() / 1000) - 3600;
    for (const entry of ['notes.txt', 'photos', '.'])
      execFileSync('touch', ['-d', `@${anHourAgo}.987654321`, path.join(moved, entry)]);
    const backedUp = JSON.parse(
      await canopySucceeds(home, 'backup', moved, '--bucket', 'Docs', '--json', '--skip-check'),
    ) as BackupJson;
    expect(backedUp.unchanged).not.toBe(true);
    const newHome = path.join(scratch, 'new-home');
    await canopySucceeds(newHome, 'login', '--local', '--data', path.join(scratch, 'local'));
    rmSync(moved, { recursive: true });
    await canopySucceeds(newHome, 'restore', '--bucket', 'Docs', '--to', moved);
    // The new home has no file index: the times come from the version's own tree.
    const after = JSON.parse(
      await canopySucceeds(newHome, 'backup', moved, '--bucket', 'Docs', '--json', '--skip-check'),
    ) as BackupJson;
    expect(after).toMatchObject({ versionId: backedUp.versionId, unchanged: true, bytesRead: 0 });
  });
});
