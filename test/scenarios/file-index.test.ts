import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

// The file index: an unchanged source makes no version and reads nothing; a changed one reads
// only what changed; and the index is never trusted beyond the version the bucket holds.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-index-'));
let engine: Engine;

/** Writes a file as if it had been written a minute ago (recent files are always re-read). */
function writeSettled(file: string, bytes: Uint8Array | string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, bytes);
  const aMinuteAgo = new Date(Date.now() - 60_000);
  utimesSync(file, aMinuteAgo, aMinuteAgo);
}

function makeSource(name: string): string {
  const dir = path.join(scratch, name);
  writeSettled(path.join(dir, 'photos', 'one.jpg'), randomBytes(300_000));
  writeSettled(path.join(dir, 'photos', 'two.jpg'), randomBytes(1_500_000));
  writeSettled(path.join(dir, 'notes.txt'), `notes of ${name}`);
  return dir;
}

beforeAll(async () => {
  const home = path.join(scratch, 'home');
  engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  await engine.loginLocal({});
  await engine.createBucket({ name: 'Index', type: 'backup', storageClass: 'hot' });
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the file index', () => {
  it('recognises an unchanged source, and notices deletions, new folders and mode changes', async () => {
    const source = makeSource('docs');
    const first = await engine.backup({ dir: source, bucket: 'Index' });
    expect(first).toMatchObject({ unchanged: false, files: 3, filesUnchanged: 0 });
    expect(first.bytesRead).toBe(first.bytesScanned);

    const again = await engine.backup({ dir: source, bucket: 'Index' });
    expect(again).toMatchObject({ unchanged: true, versionId: first.versionId, bytesRead: 0 });

    rmSync(path.join(source, 'notes.txt'));
    const deleted = await engine.backup({ dir: source, bucket: 'Index' });
    expect(deleted).toMatchObject({ unchanged: false, files: 2, filesUnchanged: 2, bytesRead: 0 });
    expect((await engine.ls({ bucket: 'Index' })).map((entry) => entry.name)).toEqual(['photos']);

    mkdirSync(path.join(source, 'empty folder'));
    const folder = await engine.backup({ dir: source, bucket: 'Index' });
    expect(folder).toMatchObject({ unchanged: false, bytesRead: 0 });
    expect((await engine.ls({ bucket: 'Index' })).map((entry) => entry.name)).toEqual([
      'empty folder',
      'photos',
    ]);

    chmodSync(path.join(source, 'photos', 'two.jpg'), 0o600);
    const mode = await engine.backup({ dir: source, bucket: 'Index' });
    expect(mode).toMatchObject({ unchanged: false, bytesRead: 0, newBytes: 0 });
    const photos = await engine.ls({ bucket: 'Index', path: 'photos' });
    expect(photos.find((entry) => entry.name === 'two.jpg')?.mode).toBe(0o600);

    const versions = await engine.listVersions({ bucket: 'Index' });
    expect(versions).toHaveLength(4);
  });

  it('re-reads every file when the bucket no longer holds the version the index describes', async () => {
    await engine.createBucket({ name: 'Swapped', type: 'backup', storageClass: 'hot' });
    const mine = makeSource('mine');
    const other = makeSource('other');
    const first = await engine.backup({ dir: mine, bucket: 'Swapped' });
    // Another source replaces the bucket's content: its active version lacks mine's File nodes.
    await engine.backup({ dir: other, bucket: 'Swapped', replaceSource: true });
    const back = await engine.backup({ dir: mine, bucket: 'Swapped', replaceSource: true });
    expect(back).toMatchObject({ unchanged: false, filesUnchanged: 0 });
    expect(back.bytesRead).toBe(first.bytesScanned);
    const target = path.join(scratch, 'restored-mine');
    await engine.restore({ bucket: 'Swapped', to: target, overwrite: false });
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('notes of mine');
    expect(readFileSync(path.join(target, 'photos', 'two.jpg'))).toEqual(
      readFileSync(path.join(mine, 'photos', 'two.jpg')),
    );
  });
});
