import { describe, expect, it } from 'vitest';
import { compactEach } from '../../../server/blocks/compact-each.ts';

// Packs and files of metadata chunks are compacted a few at a time in the background; a damaged
// one must neither stop the others nor be tried again at every sweep.

describe('compactEach', () => {
  it('goes on past one that fails, names it, and leaves it out of the next calls', async () => {
    const done: string[] = [];
    const skip = new Set<string>();
    const compact = (id: string) => {
      if (id === 'b') return Promise.reject(new Error('cut short on the disk'));
      done.push(id);
      return Promise.resolve();
    };
    await expect(compactEach(['a', 'b', 'c'], 4, skip, compact, 'pack(s)')).rejects.toThrow(
      'could not compact 1 pack(s), left as they are (b: cut short on the disk)',
    );
    expect(done).toEqual(['a', 'c']);
    expect([...skip]).toEqual(['b']);
    // The next call passes it over, and takes at most `max`.
    done.length = 0;
    await expect(compactEach(['b', 'd', 'e', 'f'], 2, skip, compact, 'pack(s)')).resolves.toBe(2);
    expect(done).toEqual(['d', 'e']);
  });
});
