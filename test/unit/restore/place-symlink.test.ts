import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { placeSymlink } from '../../../main/restore/place-file.ts';

// A restored symlink whose name something took after the restore looked (a file the user saved
// there): kept, and the link made beside it, unless the restore may replace.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-place-symlink-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const beside = (replace: boolean) => ({
  replace,
  nameBeside: (name: string) => `${name} (beside)`,
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
