import { chmodSync, lstatSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { giveModesBack } from '../../../main/restore/index.ts';

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
