import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { mountExfat, type ExfatDisk } from '../helpers/limited-disks.ts';

// Backing up an external exFAT disk (a USB stick) with the real CLI. Its inode numbers are made
// up at each mount, so the file index cannot know a file by them: after the stick was unplugged
// and plugged in again, a backup must still recognise the files it read last time.

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
});
