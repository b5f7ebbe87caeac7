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

  it('never tells more than all of it, when more was stored or moved while it read', () => {
    const shown: string[] = [];
    let now = 0;
    const progress = checkProgress(
      1e9,
      (text) => shown.push(text),
      () => now,
    );
    now = 1000;
    progress.onProgress(8e8);
    now = 2000;
    progress.onProgress(1.1e9);
    expect(shown.slice(1)).toEqual([
      '\r\x1b[Kchecking: 800 MB of 1.0 GB read back (80%), about 1 s left',
      '\r\x1b[Kchecking: 1.1 GB of 1.1 GB read back (100%), about 1 s left',
    ]);
  });
});
