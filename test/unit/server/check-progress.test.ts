import { describe, expect, it } from 'vitest';
import { checkProgress } from '../../../server/check-progress.ts';

// The line `canopy-server check` keeps rewritten on a terminal while it reads a store back.

describe('check progress', () => {
  it('says how far it is and how long is left, at most once a second, and clears itself', () => {
    const shown: string[] = [];
    let now = 0;
    const progress = checkProgress(
      4e9,
      (text) => shown.push(text),
      () => now,
    );
    now = 400;
    progress.onProgress(1e8);
    now = 2000;
    progress.onProgress(1e9);
    now = 2500;
    progress.onProgress(1.2e9);
    now = 240_000;
    progress.onProgress(2e9);
    progress.done();
    expect(shown).toEqual([
      'checking: 0 B of 4.0 GB read back (0%), estimating time left',
      '\r\x1b[Kchecking: 1.0 GB of 4.0 GB read back (25%), about 6 s left',
      '\r\x1b[Kchecking: 2.0 GB of 4.0 GB read back (50%), about 4 min left',
      '\r\x1b[K',
    ]);
  });
});
