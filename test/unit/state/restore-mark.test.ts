import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RestoreMark } from '../../../main/state/index.ts';

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
