import { describe, expect, it } from 'vitest';
import ignore from 'ignore';
import { DEFAULT_EXCLUDES, excludeRulesOf } from '../../../main/scanner/exclude-rules.ts';
import { namePrefilter } from '../../../main/scanner/name-prefilter.ts';

// A name no rule could match skips the full test (name-prefilter.ts). The verdicts must stay
// exactly those of `ignore` with every rule, for every path a walk asks about: a folder before
// what it holds, and nothing inside a folder found excluded.

/** A small seeded generator, so that a failure names rules and paths that fail again. */
function randomOf(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Pieces of names: the rules' own words in other cases, and letters that fold oddly. */
const NAME_PIECES = [
  'a',
  'B',
  'tmp',
  'TMP',
  '.',
  '~',
  '$',
  '#',
  '-',
  ' ',
  'cache',
  'Cache',
  'build',
  'log',
  '.DS_Store',
  '.ds_store',
  'thumbs.DB',
  '._',
  'lock',
  '.~lock.',
  'node_modules',
  'part',
  'σ',
  'ς',
  'Σ',
  'İ',
  'i',
  'K',
  'k',
  'ſ',
  's',
  'é',
  'e\u0301',
  '😀',
];

/** Rule lines of many shapes: plain, anchored, folder-only, negated, and some not read plainly. */
const RULE_SHAPES = [
  '*.log',
  'build/',
  '/build',
  'a/b',
  '!keep.tmp',
  '!*.TMP',
  'cache',
  '**/cache',
  'x*y',
  'Σ*',
  '*σ',
  'tmp~',
  '#not a rule',
  '',
  '   ',
  'lock ',
  '.~lock.*#',
  'a/**',
  '**/a/**',
  'b?',
  '[ab]',
  '\\#hash',
  'node_modules/',
  '!node_modules/',
  'k*',
  'ſ',
  'é',
  'e\u0301*',
  '/a/cache/',
  '!/a/',
  '*',
  'a*b*c',
  '~$*',
  '$*',
  '.*',
];

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function nameOf(random: () => number): string {
  let name = '';
  const pieces = 1 + Math.floor(random() * 3);
  for (let at = 0; at < pieces; at += 1) name += pick(random, NAME_PIECES);
  return name.trim() === '' || name === '.' || name === '..' ? `n${name}` : name;
}

describe('exclude rules told by the name first', () => {
  it('give exactly the verdicts of every rule tested in full, for any rules and names', () => {
    let prefiltered = 0;
    let skippedFullTests = 0;
    for (let seed = 1; seed <= 300; seed += 1) {
      const random = randomOf(seed);
      const kept = Array.from({ length: Math.floor(random() * 4) }, () =>
        pick(random, RULE_SHAPES),
      );
      const own = Array.from({ length: Math.floor(random() * 4) }, () =>
        pick(random, RULE_SHAPES),
      ).join(random() < 0.5 ? '\n' : '\r\n');
      const reference = ignore()
        .add([...DEFAULT_EXCLUDES])
        .add(kept)
        .add(own);
      const rules = excludeRulesOf(kept, own);
      const lines = [...DEFAULT_EXCLUDES, ...kept, ...own.split(/\r?\n/)];
      const mayMatch = namePrefilter(lines);
      if (mayMatch) prefiltered += 1;
      // A walk of a random tree: folders first, nothing inside an excluded one.
      const folders = [''];
      let asked = 0;
      while (folders.length > 0 && asked < 200) {
        const folder = folders.pop() ?? '';
        for (let entry = 0; entry < 6; entry += 1) {
          const name = nameOf(random);
          const relative = folder === '' ? name : `${folder}/${name}`;
          const isDirectory = random() < 0.3 && relative.split('/').length < 5;
          asked += 1;
          const expected = reference.ignores(isDirectory ? `${relative}/` : relative);
          expect(rules.excludes(relative, isDirectory), `seed ${seed}: ${relative}`).toBe(expected);
          if (mayMatch && !mayMatch(name)) skippedFullTests += 1;
          if (isDirectory && !expected) folders.push(relative);
        }
      }
    }
    // The comparison is of the prefilter at work: most rule sets have one, and it spares most
    // names the full test.
    expect(prefiltered).toBeGreaterThan(30);
    expect(skippedFullTests).toBeGreaterThan(1000);
  });

  it('reads the defaults and plain rules, and leaves rules it cannot read to the full test', () => {
    const defaults = namePrefilter(DEFAULT_EXCLUDES);
    expect(defaults).toBeDefined();
    expect(defaults?.('IMG_0001.jpg')).toBe(false);
    expect(defaults?.('thumbs.DB')).toBe(true);
    expect(defaults?.('report.docx.crdownload')).toBe(true);
    expect(defaults?.('~$report.docx')).toBe(true);
    expect(namePrefilter(['*.log', 'build/', '!keep.log'])?.('main.c')).toBe(false);
    for (const unread of ['b?', '[ab]', '\\#x', 'a/**', '*', 'σ*', '!*'])
      expect(namePrefilter(['*.log', unread]), unread).toBeUndefined();
  });
});
