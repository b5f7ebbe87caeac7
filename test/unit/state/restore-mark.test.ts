import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RestoreMark } from '../../../main/state/index.ts';
import { takeFileLock } from '../../../main/state/file-lock.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restore-mark-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('RestoreMark', () => {
  it('is found stopped, with its target, only once its restore lets go of it', () => {
    const home = path.join(scratch, 'home');
    const running = RestoreMark.start(home, '/media/disk/restored');
    const other = RestoreMark.start(home, '/home/me/restored');
    expect(running.token).not.toBe(other.token);
    // Both restores are still running (their locks are held in this process, as in a daemon).
    expect(RestoreMark.stopped(home)).toEqual([]);

    // As a kill would: the lock goes, the mark stays.
    running.release();
    const stopped = RestoreMark.stopped(home);
    expect(stopped.map(({ mark, target }) => [mark.token, target])).toEqual([
      [running.token, '/media/disk/restored'],
    ]);
    // Held by the run that found it: a third run at the same time does not take it too.
    expect(RestoreMark.stopped(home)).toEqual([]);
    for (const { mark } of stopped) mark.end();

    other.end();
    expect(RestoreMark.stopped(home)).toEqual([]);
    expect(readdirSync(path.join(home, 'locks'))).toEqual([]);
  });
});

describe('RestoreMark.openedFolders', () => {
  it('keeps each folder noted, a line cut short by a kill left out, until the mark ends', () => {
    const home = path.join(scratch, 'opened');
    const mark = RestoreMark.start(home, '/home/me/archive');
    mark.noteOpenedFolder({ dir: '/home/me/archive', mode: 0o555 });
    mark.noteOpenedFolder({ dir: '/home/me/archive/a\nnewline', mode: 0o500 });
    appendFileSync(path.join(home, 'locks', `restore-${mark.token}.opened`), '{"dir":"/home/me/ar');
    mark.release();
    const [stopped] = RestoreMark.stopped(home);
    expect(stopped?.mark.openedFolders()).toEqual([
      { dir: '/home/me/archive', mode: 0o555 },
      { dir: '/home/me/archive/a\nnewline', mode: 0o500 },
    ]);
    stopped?.mark.end();
    expect(readdirSync(path.join(home, 'locks'))).toEqual([]);
  });
});

describe('RestoreMark.partFiles', () => {
  it('keeps each part file noted once, a line cut short by a kill left out, until the mark ends', () => {
    const home = path.join(scratch, 'parts');
    const mark = RestoreMark.start(home, '/home/me/films');
    expect(mark.partFiles()).toEqual({ files: [], notedAt: 0 });
    const movie = {
      temporary: '/home/me/films/.canopy-restore-0a1b2c3d-1',
      place: '/home/me/films/movie.mkv',
    };
    mark.notePartFile(movie);
    // Gone on with by a later restore, which notes it again.
    mark.notePartFile(movie);
    mark.notePartFile({ temporary: 'relative', place: '/home/me/films/other.mkv' });
    appendFileSync(path.join(home, 'locks', `restore-${mark.token}.parts`), '{"temporary":"/ho');
    mark.release();
    const [stopped] = RestoreMark.stopped(home);
    const noted = stopped?.mark.partFiles();
    expect(noted?.files).toEqual([movie]);
    expect(Math.abs((noted?.notedAt ?? 0) - Date.now())).toBeLessThan(60_000);
    stopped?.mark.end();
    expect(readdirSync(path.join(home, 'locks'))).toEqual([]);
  });
});

describe('RestoreMark.stopped, with marks a kill or a user left damaged', () => {
  const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
  const makeOld = (file: string): void => utimesSync(file, twoHoursAgo, twoHoursAgo);

  it('removes the parts of a mark never made whole once they are old and no one holds them', () => {
    const home = path.join(scratch, 'unmade');
    const locks = path.join(home, 'locks');
    mkdirSync(locks, { recursive: true });
    // A kill after the target file, and one after the lock file was made too.
    writeFileSync(path.join(locks, 'restore-0000000a.json'), '{"target":"/x"}');
    writeFileSync(path.join(locks, 'restore-0000000b.json'), '{"target":"/x"}');
    writeFileSync(path.join(locks, 'restore-0000000b.lock.new'), '');
    // A mark being made right now, and one whose lock file is old but still held.
    writeFileSync(path.join(locks, 'restore-0000000c.json'), '{"target":"/x"}');
    writeFileSync(path.join(locks, 'restore-0000000d.json'), '{"target":"/x"}');
    const making = takeFileLock(path.join(locks, 'restore-0000000d.lock.new'));
    // A restore running for hours: its mark is whole and held.
    const running = RestoreMark.start(home, '/home/me/restored');
    for (const name of readdirSync(locks))
      if (!name.startsWith('restore-0000000c')) makeOld(path.join(locks, name));

    expect(RestoreMark.stopped(home)).toEqual([]);
    expect(readdirSync(locks).sort()).toEqual(
      [
        'restore-0000000c.json',
        'restore-0000000d.json',
        'restore-0000000d.lock.new',
        `restore-${running.token}.json`,
        `restore-${running.token}.lock`,
      ].sort(),
    );
    making?.close();
    running.end();
  });

  it('leaves a mark whose target cannot be read, mends a damaged lock, and still finds the others', () => {
    const home = path.join(scratch, 'unreadable');
    const unreadable = RestoreMark.start(home, '/media/disk/restored');
    const readable = RestoreMark.start(home, '/home/me/restored');
    unreadable.release();
    readable.release();
    // Reading it fails with EISDIR, as an unreadable file would with EACCES for a user.
    const targetFile = path.join(home, 'locks', `restore-${unreadable.token}.json`);
    rmSync(targetFile);
    mkdirSync(targetFile);
    // A lock file damaged on its disk, with no target beside it: mended, taken, and tidied
    // away, as a lock holds nothing (file-lock.ts).
    const garbled = path.join(home, 'locks', 'restore-0000000e.lock');
    writeFileSync(garbled, 'not a database, '.repeat(64));

    const stopped = RestoreMark.stopped(home);
    expect(stopped.map(({ mark, target }) => [mark.token, target])).toEqual([
      [readable.token, '/home/me/restored'],
    ]);
    for (const { mark } of stopped) mark.end();
    // Not held by the run that could not read it: the next run looks at it again.
    expect(() => RestoreMark.stopped(home)).not.toThrow();
    expect(readdirSync(path.join(home, 'locks')).sort()).toEqual(
      [`restore-${unreadable.token}.json`, `restore-${unreadable.token}.lock`].sort(),
    );
  });
});
