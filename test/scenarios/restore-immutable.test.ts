import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopyFails, canopySucceeds, loginWithBucket } from '../helpers/canopy-cli.ts';

// A restore with --overwrite into a folder holding files marked immutable (chattr +i), which
// not even root may replace or remove: each stays, the restored copy goes beside it, the
// command says why for each, and everything else is replaced as asked. A folder marked so takes
// nothing, and the restore says why, not "permission denied" to root.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-immutable-'));
const home = path.join(scratch, 'home');
const source = path.join(scratch, 'source');
const target = path.join(scratch, 'target');
/** Files marked immutable, to unmark before the scratch folder goes. */
const marked: string[] = [];

function markImmutable(file: string): void {
  execFileSync('chattr', ['+i', file]);
  marked.push(file);
}

beforeAll(async () => {
  mkdirSync(path.join(source, 'notes'), { recursive: true });
  writeFileSync(path.join(source, 'contract.txt'), 'the signed contract');
  writeFileSync(path.join(source, 'plain.txt'), 'plain');
  writeFileSync(path.join(source, 'notes', 'a.txt'), 'note a');
  symlinkSync('plain.txt', path.join(source, 'latest'));
  await loginWithBucket(home, path.join(scratch, 'local'), 'Papers');
  await canopySucceeds(home, 'backup', source, '--bucket', 'Papers');
});

afterAll(() => {
  for (const file of marked) execFileSync('chattr', ['-i', file]);
  rmSync(scratch, { recursive: true, force: true });
});

describe('restore --overwrite over immutable files', () => {
  it('keeps each, restores beside it saying why, and replaces the rest', async () => {
    mkdirSync(target);
    // Of a file's name, of a folder's, and of a symlink's.
    for (const name of ['contract.txt', 'notes', 'latest']) {
      writeFileSync(path.join(target, name), `an immutable ${name}`);
      markImmutable(path.join(target, name));
    }
    writeFileSync(path.join(target, 'plain.txt'), 'edited');

    const printed = await canopySucceeds(
      home,
      'restore',
      '--bucket',
      'Papers',
      '--to',
      target,
      '--overwrite',
    );
    const why =
      'the system would not let it be replaced (as for a file marked immutable: lsattr shows it)';
    expect(
      printed
        .split('\n')
        .filter((line) => line.startsWith('kept '))
        .sort(),
    ).toEqual(
      [
        ['contract.txt', 'contract (restored).txt'],
        ['latest', 'latest (restored)'],
        ['notes', 'notes (restored)'],
      ].map(([name, copy]) => `kept ${name}, ${why}; restored as ${copy}`),
    );
    expect(readdirSync(target).sort()).toEqual([
      'contract (restored).txt',
      'contract.txt',
      'latest',
      'latest (restored)',
      'notes',
      'notes (restored)',
      'plain.txt',
    ]);
    expect(readFileSync(path.join(target, 'contract.txt'), 'utf8')).toBe(
      'an immutable contract.txt',
    );
    expect(readFileSync(path.join(target, 'contract (restored).txt'), 'utf8')).toBe(
      'the signed contract',
    );
    expect(readFileSync(path.join(target, 'notes (restored)', 'a.txt'), 'utf8')).toBe('note a');
    expect(readlinkSync(path.join(target, 'latest (restored)'))).toBe('plain.txt');
    expect(readFileSync(path.join(target, 'plain.txt'), 'utf8')).toBe('plain');
  });
});

describe('a restore into a folder marked immutable', () => {
  it('is refused, saying why, as --dry-run tells first', async () => {
    const folder = path.join(scratch, 'immutable-folder');
    mkdirSync(folder);
    markImmutable(folder);
    const why = `cannot write in ${folder}: the system refused it (as for a folder marked immutable: lsattr -d shows it)`;
    expect(await canopyFails(home, 'restore', '--bucket', 'Papers', '--to', folder)).toBe(
      `canopy: ${why}\n`,
    );
    expect(
      await canopyFails(home, 'restore', '--bucket', 'Papers', '--to', folder, '--dry-run'),
    ).toBe(`canopy: the restore would be refused: ${why}\n`);
    expect(readdirSync(folder)).toEqual([]);
  });
});
