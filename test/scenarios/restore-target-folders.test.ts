import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { firstBackup } from '../helpers/first-backup.ts';

// The folders a restore writes into. One file restored where it was backed up from, after the
// folders above it were deleted as well (a user's ~/.gnupg gone, one key file wanted back): those
// folders come back as the version holds them, with their modes and times, so a private folder
// is private again rather than a new folder anyone may list. A target deleted while the restore
// fills it fails the restore, saying so; a file saved in it under a name the restore is writing
// is kept, and the restored file goes beside it.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-folders-above-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const privateDir = path.join(source, 'private');
const keysDir = path.join(privateDir, 'keys');
const PRIVATE_TIME = new Date('2020-01-02T03:04:05Z');
const KEYS_TIME = new Date('2021-06-07T08:09:10Z');
let engine: Engine;
/** Folders whose modes are read as each restored file is written, before its rename. */
let watched: string[] = [];
/** Their modes, as each file was written. */
const modesWhileWritten: number[] = [];
/** Run as each restored file is written, before its rename. */
let onFileWritten: (() => void) | undefined;

function modeAndTime(dir: string): { mode: number; mtime: number } {
  const stats = statSync(dir);
  return { mode: stats.mode & 0o7777, mtime: stats.mtime.getTime() };
}

beforeAll(async () => {
  mkdirSync(keysDir, { recursive: true });
  writeFileSync(path.join(keysDir, 'id'), 'a secret key', { mode: 0o600 });
  writeFileSync(path.join(source, 'readme.txt'), 'public');
  chmodSync(privateDir, 0o700);
  chmodSync(keysDir, 0o750);
  utimesSync(keysDir, KEYS_TIME, KEYS_TIME);
  utimesSync(privateDir, PRIVATE_TIME, PRIVATE_TIME);
  engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    afterFileRestored: () => {
      for (const dir of watched) modesWhileWritten.push(statSync(dir).mode & 0o7777);
      onFileWritten?.();
    },
  });
  await firstBackup(engine, source, 'Keys');
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a file restored where it was backed up from, its folders deleted too', () => {
  it('makes the folders above it again with the modes and times the version holds', async () => {
    rmSync(privateDir, { recursive: true });
    watched = [privateDir, keysDir];
    const restored = await engine.restore({
      bucket: 'Keys',
      path: 'private/keys/id',
      overwrite: false,
    });
    expect(restored).toMatchObject({ files: 1, restoredInto: keysDir });
    expect(readFileSync(path.join(keysDir, 'id'), 'utf8')).toBe('a secret key');
    expect(modeAndTime(privateDir)).toEqual({ mode: 0o700, mtime: PRIVATE_TIME.getTime() });
    expect(modeAndTime(keysDir)).toEqual({ mode: 0o750, mtime: KEYS_TIME.getTime() });
    // Never more open to others than they were backed up, also while the file was written.
    expect(modesWhileWritten).toEqual([0o700, 0o750]);
  });

  it('leaves a folder above it that is there as it is, and makes only those missing', async () => {
    rmSync(keysDir, { recursive: true });
    watched = [];
    chmodSync(privateDir, 0o755);
    const before = modeAndTime(privateDir);
    await engine.restore({ bucket: 'Keys', path: 'private/keys/id', overwrite: false });
    expect(modeAndTime(keysDir)).toEqual({ mode: 0o750, mtime: KEYS_TIME.getTime() });
    // Its mode as the user set it; its time moved only by the folder made in it.
    expect(modeAndTime(privateDir).mode).toBe(before.mode);
  });

  it('keeps a private folder restored whole private while its files are written', async () => {
    const target = path.join(scratch, 'whole');
    watched = [path.join(target, 'private'), path.join(target, 'private', 'keys')];
    modesWhileWritten.length = 0;
    await engine.restore({ bucket: 'Keys', path: 'private', to: target, overwrite: false });
    expect(modesWhileWritten).toEqual([0o700, 0o750]);
    expect(modeAndTime(path.join(target, 'private'))).toEqual({
      mode: 0o700,
      mtime: PRIVATE_TIME.getTime(),
    });
  });

  it('restored into another folder, makes none of them there', async () => {
    watched = [];
    const target = path.join(scratch, 'elsewhere');
    await engine.restore({ bucket: 'Keys', path: 'private/keys/id', to: target, overwrite: false });
    expect(readFileSync(path.join(target, 'id'), 'utf8')).toBe('a secret key');
    expect(readdirSync(target)).toEqual(['id']);
  });
});

describe('a restore whose target is deleted while it fills it', () => {
  it('fails saying so, and restores whole when run again', async () => {
    watched = [];
    const target = path.join(scratch, 'deleted-meanwhile');
    onFileWritten = () => {
      onFileWritten = undefined;
      rmSync(target, { recursive: true });
    };
    await expect(
      engine.restore({ bucket: 'Keys', to: target, overwrite: false }),
    ).rejects.toMatchObject({
      code: 'not_found',
      message: `${target} was deleted or moved away during the restore, with what was restored into it: run the restore again into a folder that stays`,
    });
    expect(onFileWritten).toBeUndefined();

    const again = await engine.restore({ bucket: 'Keys', to: target, overwrite: false });
    expect(again).toMatchObject({ files: 2, renamed: [] });
    expect(readFileSync(path.join(target, 'private', 'keys', 'id'), 'utf8')).toBe('a secret key');
  });
});

describe('a restore whose file names are taken while it writes them', () => {
  it('leaves what the user saved under a name, and puts the restored file beside it', async () => {
    watched = [];
    const target = path.join(scratch, 'saved-meanwhile');
    const names = [path.join('private', 'keys', 'id'), 'readme.txt'];
    onFileWritten = () => {
      // The user saves their own files under both names before the first is renamed.
      onFileWritten = undefined;
      for (const name of names) {
        mkdirSync(path.dirname(path.join(target, name)), { recursive: true });
        writeFileSync(path.join(target, name), 'saved by the user meanwhile');
      }
    };
    const restored = await engine.restore({ bucket: 'Keys', to: target, overwrite: false });
    expect(onFileWritten).toBeUndefined();
    expect([...restored.renamed].sort()).toEqual([
      path.join('private', 'keys', 'id (restored)'),
      'readme (restored).txt',
    ]);
    for (const name of names)
      expect(readFileSync(path.join(target, name), 'utf8')).toBe('saved by the user meanwhile');
    expect(readFileSync(path.join(target, 'private', 'keys', 'id (restored)'), 'utf8')).toBe(
      'a secret key',
    );
    expect(readFileSync(path.join(target, 'readme (restored).txt'), 'utf8')).toBe('public');
  });
});
