import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { placeSymlink } from '../../../main/restore/place-file.ts';
import { REPLACING_REFUSED } from '../../../main/restore/replaceable.ts';

// A restored symlink whose name something took after the restore looked (a file the user saved
// there): kept, and the link made beside it, unless the restore may replace. What it may
// replace but the system will not let go of (a file marked immutable) is kept all the same.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-place-symlink-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What placeSymlink said it kept though it was to replace it, and why. */
const notReplaced: Array<[string, string]> = [];
const beside = (replace: boolean) => ({
  replace,
  nameBeside: (name: string) => `${name} (beside)`,
  notReplaced: (name: string, reason: string) => notReplaced.push([name, reason]),
});

describe('placeSymlink', () => {
  it('makes the link at its name when that is free', () => {
    const dir = path.join(scratch, 'free');
    mkdirSync(dir);
    expect(placeSymlink('notes.txt', path.join(dir, 'latest'), beside(false))).toBe(
      path.join(dir, 'latest'),
    );
    expect(readlinkSync(path.join(dir, 'latest'))).toBe('notes.txt');
  });

  it('keeps what took its name and makes the link beside it, unless it may replace', () => {
    for (const replace of [false, true]) {
      const dir = path.join(scratch, `taken-${replace}`);
      mkdirSync(dir);
      const name = path.join(dir, 'latest');
      writeFileSync(name, 'the user saved this');
      const placed = placeSymlink('notes.txt', name, beside(replace));
      if (replace) {
        expect(placed).toBe(name);
        expect(readlinkSync(name)).toBe('notes.txt');
      } else {
        expect(placed).toBe(`${name} (beside)`);
        expect(readFileSync(name, 'utf8')).toBe('the user saved this');
        expect(readlinkSync(`${name} (beside)`)).toBe('notes.txt');
      }
    }
  });
});

describe('placeSymlink, told to replace what the system will not let go of', () => {
  it('keeps it, makes the link beside it, and says why', () => {
    const dir = path.join(scratch, 'immutable');
    mkdirSync(dir);
    const name = path.join(dir, 'latest');
    writeFileSync(name, 'kept by chattr +i');
    execFileSync('chattr', ['+i', name]);
    try {
      expect(placeSymlink('notes.txt', name, beside(true))).toBe(`${name} (beside)`);
      expect(readFileSync(name, 'utf8')).toBe('kept by chattr +i');
      expect(readlinkSync(`${name} (beside)`)).toBe('notes.txt');
      expect(notReplaced).toEqual([[name, REPLACING_REFUSED]]);
    } finally {
      execFileSync('chattr', ['-i', name]);
    }
  });
});
