import { describe, expect, it } from 'vitest';
import {
  compactEach,
  type CompactionCandidate,
  type PassedOver,
} from '../../../server/blocks/compact-each.ts';

// Packs and files of metadata chunks are compacted a few at a time in the background; a damaged
// one must neither stop the others nor be tried again at every sweep, yet is tried again once
// what it holds changed (its damaged block sent again by a client, and stored elsewhere).

/** Candidates named by `ids`, each with `liveBytes` (1000 unless given for it). */
function candidates(ids: string[], liveBytes: Record<string, number> = {}): CompactionCandidate[] {
  return ids.map((id) => ({ id, liveBytes: liveBytes[id] ?? 1000 }));
}

describe('compactEach', () => {
  const done: string[] = [];
  let broken = new Set<string>();
  const compact = (id: string) => {
    if (broken.has(id)) return Promise.reject(new Error('cut short on the disk'));
    done.push(id);
    return Promise.resolve();
  };

  it('goes on past one that fails, names it, and leaves it out of the next calls', async () => {
    done.length = 0;
    broken = new Set(['b']);
    const skip: PassedOver = new Map();
    await expect(
      compactEach(candidates(['a', 'b', 'c']), 4, skip, compact, 'pack(s)'),
    ).rejects.toThrow('could not compact 1 pack(s), left as they are (b: cut short on the disk)');
    expect(done).toEqual(['a', 'c']);
    expect([...skip.keys()]).toEqual(['b']);
    // The next call passes it over, and takes at most `max`.
    done.length = 0;
    await expect(
      compactEach(candidates(['b', 'd', 'e', 'f']), 2, skip, compact, 'pack(s)'),
    ).resolves.toBe(2);
    expect(done).toEqual(['d', 'e']);
  });

  it('tries one that failed again once its live bytes changed, and forgets it once done', async () => {
    done.length = 0;
    broken = new Set(['b']);
    const skip: PassedOver = new Map();
    await expect(compactEach(candidates(['b']), 4, skip, compact, 'pack(s)')).rejects.toThrow(
      '(b: cut short on the disk)',
    );
    // Still damaged after a block of it went: failed again, and passed over at its new size.
    const smaller = candidates(['b'], { b: 800 });
    await expect(compactEach(smaller, 4, skip, compact, 'pack(s)')).rejects.toThrow(
      '(b: cut short on the disk)',
    );
    await expect(compactEach(smaller, 4, skip, compact, 'pack(s)')).resolves.toBe(0);
    // Its damaged block stored elsewhere since: compacted.
    broken = new Set();
    await expect(
      compactEach(candidates(['b'], { b: 600 }), 4, skip, compact, 'pack(s)'),
    ).resolves.toBe(1);
    expect(done).toEqual(['b']);
    expect(skip.size).toBe(0);
  });
});
