import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { shellWord } from '../../../cli/shell-word.ts';

// A path the output suggests in a command line must come back whole from a real shell, as a
// user copying and pasting it gets it.

/** What bash makes of `word` as one argument of a command. */
function asBashReadsIt(word: string): string {
  const run = spawnSync('bash', ['-c', `printf '%s' ${word}`], { encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  return run.stdout;
}

describe('shellWord', () => {
  it('leaves a plain path as it is', () => {
    expect(shellWord('2019/beach-1.jpg')).toBe('2019/beach-1.jpg');
  });

  it.each([
    'my report.txt',
    "it's mine.txt",
    'costs $HOME `date` $(ls) !x',
    'two\nlines',
    '*.iso',
    "''",
    'tab\there',
  ])('quotes %j so that bash reads it back whole', (name) => {
    const word = shellWord(name);
    expect(word).not.toBe(name);
    expect(asBashReadsIt(word)).toBe(name);
  });
});
