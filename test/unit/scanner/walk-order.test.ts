import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { walkSource } from '../../../main/scanner/index.ts';
import { compareUtf8 } from '../../../main/protocol/utf8-order.ts';

// A folder's entries come out in the order of their names' UTF-8 bytes, which is the order of a
// UnixFS folder's links: any other order would give other CIDs than a standard importer.

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const byBytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Names whose UTF-16 order and UTF-8 order differ, and some that share prefixes. */
const NAMES = [
  'a',
  'ab',
  'B',
  '_x',
  'é',
  'e\u0301',
  '\uE000 private',
  '\uFF5E tilde',
  '\uFFFD',
  '😀 face',
  '𝄞 clef',
  '中文',
  'zz',
];

describe('walk order', () => {
  it('lists each folder by the UTF-8 bytes of its names, a folder right before its contents', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-order-'));
    dirs.push(dir);
    for (const name of NAMES) writeFileSync(path.join(dir, name), 'x');
    mkdirSync(path.join(dir, 'm'));
    for (const name of ['😀', '\uFF5E', 'a']) writeFileSync(path.join(dir, 'm', name), 'x');
    const seen: string[] = [];
    for await (const entry of walkSource(dir, { onSkip: () => undefined })) seen.push(entry.path);
    const top = [...NAMES, 'm'].sort(byBytes);
    const expected = top.flatMap((name) =>
      name === 'm' ? ['m', 'm/a', 'm/\uFF5E', 'm/😀'] : [name],
    );
    expect(seen).toEqual(expected);
  });

  it('sorts names as their encoded bytes sort', () => {
    // Code units from every range that matters: ASCII, two and three byte forms, the private
    // use area right below the surrogates' UTF-8 place, and characters above U+FFFF.
    const alphabet = [
      'a',
      'Z',
      '\u00e9',
      '\u07ff',
      '\u0800',
      '\ud7ff',
      '\ue000',
      '\uffff',
      '😀',
      '𐀀',
      '\u{10ffff}',
    ];
    const names: string[] = [];
    let seed = 7;
    for (let i = 0; i < 400; i += 1) {
      let name = '';
      for (let length = (i % 4) + 1; length > 0; length -= 1) {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        name += alphabet[seed % alphabet.length];
      }
      names.push(name);
    }
    expect([...names].sort(compareUtf8)).toEqual([...names].sort(byBytes));
  });
});
