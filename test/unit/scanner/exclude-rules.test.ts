import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  excludeRulesOf,
  excludingFolders,
  faultInExcludeRule,
  loadExcludeRules,
  ruleIncludingAgain,
  TESTS_PER_MATCHER,
  walkSource,
  type SkippedItem,
} from '../../../main/scanner/index.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function walk(
  dir: string,
  kept: readonly string[] = [],
): Promise<{ included: string[]; excluded: string[]; skipped: SkippedItem[] }> {
  const included: string[] = [];
  const excluded: string[] = [];
  const skipped: SkippedItem[] = [];
  const rules = await loadExcludeRules(dir, kept);
  for await (const entry of walkSource(dir, {
    rules,
    onSkip: (item) => skipped.push(item),
    onExcluded: (p) => excluded.push(p),
  })) {
    included.push(entry.path);
  }
  return { included, excluded, skipped };
}

describe('exclude rules', () => {
  it("skip OS junk, temp, lock and partial downloads and a restore's unfinished files by default, and keep dotfiles", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    for (const name of [
      '.DS_Store',
      'Thumbs.db',
      'draft.tmp',
      'movie.mkv.crdownload',
      '~$report.docx',
      '.~lock.sheet.ods#',
      '.canopy-restore-1a2b3c4d-7',
      '.bashrc',
      'report.docx',
    ]) {
      writeFileSync(path.join(dir, name), 'x');
    }
    mkdirSync(path.join(dir, 'node_modules', '.cache'), { recursive: true });
    writeFileSync(path.join(dir, 'node_modules', '.cache', 'junk'), 'x');
    writeFileSync(path.join(dir, 'node_modules', 'kept.js'), 'x');
    // The wastebasket of a home folder; a folder of that name deeper down is someone's own.
    mkdirSync(path.join(dir, '.local', 'share', 'Trash', 'files'), { recursive: true });
    writeFileSync(path.join(dir, '.local', 'share', 'Trash', 'files', 'old.txt'), 'x');
    mkdirSync(path.join(dir, 'game', '.local', 'share', 'Trash'), { recursive: true });
    writeFileSync(path.join(dir, 'game', '.local', 'share', 'Trash', 'level.dat'), 'x');
    const { included, excluded } = await walk(dir);
    expect(included.sort()).toEqual([
      '.bashrc',
      '.local',
      '.local/share',
      'game',
      'game/.local',
      'game/.local/share',
      'game/.local/share/Trash',
      'game/.local/share/Trash/level.dat',
      'node_modules',
      'node_modules/kept.js',
      'report.docx',
    ]);
    expect(excluded.sort()).toEqual([
      '.DS_Store',
      '.canopy-restore-1a2b3c4d-7',
      '.local/share/Trash',
      '.~lock.sheet.ods#',
      'Thumbs.db',
      'draft.tmp',
      'movie.mkv.crdownload',
      'node_modules/.cache',
      '~$report.docx',
    ]);
  });

  it("adds the source's .canopyignore, which can also re-include a default", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    writeFileSync(path.join(dir, '.canopyignore'), '# mine\nbuild/\n*.log\n!keep.tmp\n');
    mkdirSync(path.join(dir, 'build'));
    writeFileSync(path.join(dir, 'build', 'out.o'), 'x');
    writeFileSync(path.join(dir, 'app.log'), 'x');
    writeFileSync(path.join(dir, 'keep.tmp'), 'x');
    writeFileSync(path.join(dir, 'main.c'), 'x');
    const { included, excluded } = await walk(dir);
    expect(included.sort()).toEqual(['.canopyignore', 'keep.tmp', 'main.c']);
    expect(excluded.sort()).toEqual(['app.log', 'build']);
  });

  it('put the rules kept for the source after the defaults and before its .canopyignore', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    // Kept: one rule of its own, one that re-includes a default; the file re-includes one of
    // the kept rules' files, and a kept rule that re-includes is undone by the file.
    writeFileSync(path.join(dir, '.canopyignore'), '!keep.iso\nnotes.tmp\n');
    for (const name of ['disk.iso', 'keep.iso', 'Thumbs.db', 'notes.tmp', 'main.c'])
      writeFileSync(path.join(dir, name), 'x');
    const { included, excluded } = await walk(dir, ['*.iso', '!Thumbs.db', '!notes.tmp']);
    expect(included.sort()).toEqual(['.canopyignore', 'Thumbs.db', 'keep.iso', 'main.c']);
    expect(excluded.sort()).toEqual(['disk.iso', 'notes.tmp']);
  });

  it('tell which rule excludes a path, and where the rule is written', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    mkdirSync(path.join(dir, 'home', 'ann', '.canopy'), { recursive: true });
    const rules = excludingFolders(excludeRulesOf(['build', '!keep.tmp'], '# mine\n*.iso\n'), dir, [
      path.join(dir, 'home', 'ann', '.canopy'),
    ]);
    expect(rules.excludedBy('draft.tmp', false)).toEqual({ from: 'defaults', rule: '*.tmp' });
    expect(rules.excludedBy('keep.tmp', false)).toBeUndefined();
    expect(rules.excludedBy('build', true)).toEqual({ from: 'kept', rule: 'build' });
    expect(rules.excludedBy('photos/disk.iso', false)).toEqual({
      from: 'ignore-file',
      rule: '*.iso',
    });
    // The later rule wins, as in git: `.cache/` comes after `node_modules/.cache/`.
    expect(rules.excludedBy('node_modules/.cache', true)).toEqual({
      from: 'defaults',
      rule: '.cache/',
    });
    expect(rules.excludedBy('home/ann/.canopy', true)).toEqual({ from: 'canopy' });
    expect(rules.excludedBy('photos/beach.jpg', false)).toBeUndefined();
  });

  it('give the rule that includes again exactly one path, whatever its name holds', () => {
    const names = ['target', 'a[1]', 'x*y', 'q?', 'b\\c', 'sp ace', 'trailing  ', '#hash', '!bang'];
    for (const name of names) {
      for (const isDirectory of [true, false]) {
        const at = `deep/${name}`;
        const rule = ruleIncludingAgain(at, isDirectory);
        expect(rule, name).toBeDefined();
        // All in deep/ excluded, then the one rule: it includes the path, and no look-alike.
        const rules = excludeRulesOf(['deep/*', rule ?? ''], '');
        expect(rules.includesAgain(at, isDirectory), `${rule} for ${at}`).toBe(true);
        expect(rules.excludes(at, isDirectory), `${rule} for ${at}`).toBe(false);
        for (const other of [`other/${name}`, `deep/${name}x`, 'deep/a1', 'deep/xzy', 'deep/qq'])
          expect(rules.includesAgain(other, isDirectory), `${rule} for ${other}`).toBe(false);
      }
    }
    // A name holding a line break cannot be named by a one-line rule.
    expect(ruleIncludingAgain('two\nlines', true)).toBeUndefined();
  });

  it('keep a rule only when it is one line that says something', () => {
    expect(faultInExcludeRule('*.iso')).toBeUndefined();
    expect(faultInExcludeRule('  build/ ')).toBeUndefined();
    expect(faultInExcludeRule('a\nb')).toBe('a rule is one line');
    expect(faultInExcludeRule('a\r')).toBe('a rule is one line');
    expect(faultInExcludeRule('')).toBe('a rule cannot be empty');
    expect(faultInExcludeRule(' \t')).toBe('a rule cannot be empty');
  });

  it('take a .canopyignore kept elsewhere through a symbolic link', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    writeFileSync(path.join(dir, 'shared-rules'), '*.log\n');
    symlinkSync('shared-rules', path.join(dir, '.canopyignore'));
    writeFileSync(path.join(dir, 'app.log'), 'x');
    const { excluded } = await walk(dir);
    expect(excluded).toEqual(['app.log']);
  });

  it('refuse a .canopyignore that is a folder or a named pipe, clearly and without waiting', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    const rules = path.join(dir, '.canopyignore');
    mkdirSync(rules);
    await expect(loadExcludeRules(dir)).rejects.toMatchObject({
      code: 'usage',
      message: `cannot read the rules in ${rules}: it is a folder, not a file; fix or remove it and back up again`,
    });
    rmSync(rules, { recursive: true });
    expect(spawnSync('mkfifo', [rules]).status).toBe(0);
    await expect(loadExcludeRules(dir)).rejects.toMatchObject({
      code: 'usage',
      message: expect.stringContaining('it is a named pipe, not a file') as unknown,
    });
  });

  it('refuse a .canopyignore that links to rules no longer there, rather than back up without them', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    const rules = path.join(dir, '.canopyignore');
    symlinkSync('../dotfiles/canopyignore', rules);
    await expect(loadExcludeRules(dir)).rejects.toMatchObject({
      code: 'usage',
      message: `cannot read the rules in ${rules}: it links to ../dotfiles/canopyignore, which is not there; fix or remove it and back up again`,
    });
    // With no .canopyignore at all, only the defaults and the kept rules apply.
    rmSync(rules);
    expect((await loadExcludeRules(dir, ['*.iso'])).excludes('disk.iso', false)).toBe(true);
  });

  it('give the same verdicts all through a walk of many thousand paths', async () => {
    // The matcher is replaced every TESTS_PER_MATCHER paths, so that it does not keep a verdict
    // for every file; the source's own rules must come with each new one.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-rules-'));
    dirs.push(dir);
    writeFileSync(path.join(dir, '.canopyignore'), 'build/\n*.log\n!keep.tmp\n');
    const rules = await loadExcludeRules(dir, ['*.iso']);
    const verdicts: boolean[] = [];
    for (let i = 0; i < TESTS_PER_MATCHER; i += 1) {
      verdicts.push(
        rules.excludes(`d${i}`, true),
        rules.excludes(`d${i}/app.log`, false),
        rules.excludes(`d${i}/keep.tmp`, false),
        rules.excludes(`d${i}/draft.tmp`, false),
        rules.excludes(`d${i}/build`, true),
        rules.excludes(`d${i}/disk.iso`, false),
      );
    }
    const expected = Array.from({ length: TESTS_PER_MATCHER }, () => [
      false,
      true,
      false,
      true,
      true,
      true,
    ]).flat();
    expect(verdicts).toEqual(expected);
  });
});
