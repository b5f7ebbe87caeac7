import { chmodSync, lstatSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { giveModesBack } from '../../../main/restore/index.ts';
import { mayChangeLook } from '../../../main/restore/opened-folders.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-opened-folders-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const modeOf = (file: string): number => lstatSync(file).mode & 0o7777;

describe('giveModesBack, after a restore killed with folders opened', () => {
  it('gives back the modes of those still as it left them, and no other', () => {
    const left = path.join(scratch, 'left-opened');
    const changed = path.join(scratch, 'changed-since');
    const nowFile = path.join(scratch, 'a-file-now');
    for (const dir of [left, changed]) mkdirSync(dir);
    // Opened from 0555 and 0500, as the restore does (u+wx); the user then set 0750 on one.
    chmodSync(left, 0o755);
    chmodSync(changed, 0o750);
    writeFileSync(nowFile, '');
    chmodSync(nowFile, 0o755);
    expect(
      giveModesBack([
        { dir: left, mode: 0o555 },
        { dir: changed, mode: 0o500 },
        { dir: nowFile, mode: 0o555 },
        { dir: path.join(scratch, 'gone'), mode: 0o555 },
      ]),
    ).toBe(true);
    expect([left, changed, nowFile].map(modeOf)).toEqual([0o555, 0o750, 0o755]);
  });
});

describe('mayChangeLook, for a folder that was there before a restore --overwrite', () => {
  const getuid = Object.getOwnPropertyDescriptor(process, 'getuid');
  afterEach(() => {
    vi.restoreAllMocks();
    if (getuid) Object.defineProperty(process, 'getuid', getuid);
  });

  it("is true for root and the folder's owner, false for another user, and true without owners", () => {
    const folder = path.join(scratch, 'owned');
    mkdirSync(folder);
    const stats = lstatSync(folder);
    const uid = vi.spyOn(process, 'getuid');
    uid.mockReturnValue(0);
    expect(mayChangeLook(stats)).toBe(true);
    uid.mockReturnValue(stats.uid);
    expect(mayChangeLook(stats)).toBe(true);
    uid.mockReturnValue(stats.uid + 1000);
    expect(mayChangeLook(stats)).toBe(false);
    vi.restoreAllMocks();
    // As on Windows, where Node has no getuid: the change is tried, as it always was.
    Object.defineProperty(process, 'getuid', { value: undefined, configurable: true });
    expect(mayChangeLook(stats)).toBe(true);
  });
});
