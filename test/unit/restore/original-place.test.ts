import { describe, expect, it } from 'vitest';
import { originalPlace } from '../../../main/restore/original-place.ts';

// Where a restore with no folder named puts a version's files: back where they were backed up
// from, on the computer that backed them up.

describe('originalPlace', () => {
  const label = 'studio:/home/ann/Documents';

  it('is the folder backed up for the whole version, and the folder that held a path', () => {
    expect(originalPlace(label, undefined, 'studio')).toBe('/home/ann/Documents');
    expect(originalPlace(label, '', 'studio')).toBe('/home/ann/Documents');
    expect(originalPlace(label, 'letters', 'studio')).toBe('/home/ann/Documents');
    expect(originalPlace(label, 'letters/2024/may.txt', 'studio')).toBe(
      '/home/ann/Documents/letters/2024',
    );
    expect(originalPlace(label, '/letters/2024/', 'studio')).toBe('/home/ann/Documents/letters');
  });

  it('keeps a colon inside the folder', () => {
    expect(originalPlace('studio:/data/a:b', 'c/d', 'studio')).toBe('/data/a:b/c');
  });

  it('refuses a version from another computer, and names where it came from', () => {
    expect(() => originalPlace(label, 'letters', 'laptop')).toThrow(
      expect.objectContaining({
        code: 'usage',
        message:
          'this version was backed up from /home/ann/Documents on studio, not on this computer; name a folder to restore into (--to DIR)',
      }),
    );
  });

  it('refuses a version that names no folder, or not an absolute one', () => {
    for (const odd of [undefined, 42, '', 'studio', ':/home/ann', 'studio:relative/path'])
      expect(() => originalPlace(odd, undefined, 'studio')).toThrow(
        expect.objectContaining({ code: 'usage' }),
      );
  });

  it('refuses a path that would lead out of the folder', () => {
    expect(() => originalPlace(label, '../../etc/passwd', 'studio')).toThrow(
      expect.objectContaining({ code: 'not_found' }),
    );
  });
});
