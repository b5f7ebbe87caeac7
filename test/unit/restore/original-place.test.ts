import { describe, expect, it } from 'vitest';
import { originalPlace } from '../../../main/restore/original-place.ts';

// Where a restore with no folder named puts a version's files: back where they were backed up
// from, on the computer that backed them up.

/** This computer, as the restore sees it: named `hostname`, with the folders `there`. */
function host(hostname: string, there: readonly string[] = ['/home/ann/Documents', '/data/a:b']) {
  return { hostname, isFolder: (dir: string) => there.includes(dir) };
}

describe('originalPlace', () => {
  const label = 'studio:/home/ann/Documents';

  it('is the folder backed up for the whole version, and the folder that held a path', () => {
    expect(originalPlace(label, undefined, host('studio'))).toBe('/home/ann/Documents');
    expect(originalPlace(label, '', host('studio'))).toBe('/home/ann/Documents');
    expect(originalPlace(label, 'letters', host('studio'))).toBe('/home/ann/Documents');
    expect(originalPlace(label, 'letters/2024/may.txt', host('studio'))).toBe(
      '/home/ann/Documents/letters/2024',
    );
    expect(originalPlace(label, '/letters/2024/', host('studio'))).toBe(
      '/home/ann/Documents/letters',
    );
    // As the shell completes it: the path the file had.
    expect(originalPlace(label, '/home/ann/Documents/letters/may.txt', host('studio'))).toBe(
      '/home/ann/Documents/letters',
    );
  });

  it('keeps a colon inside the folder', () => {
    expect(originalPlace('studio:/data/a:b', 'c/d', host('studio'))).toBe('/data/a:b/c');
  });

  it('refuses a version from another computer, and names where it came from', () => {
    expect(() => originalPlace(label, 'letters', host('laptop'))).toThrow(
      expect.objectContaining({
        code: 'usage',
        message:
          'this version was backed up from /home/ann/Documents on studio, not on this computer; name a folder to restore into (--to DIR)',
      }),
    );
  });

  it('refuses a version that names no folder, or not an absolute one', () => {
    for (const odd of [undefined, 42, '', 'studio', ':/home/ann', 'studio:relative/path'])
      expect(() => originalPlace(odd, undefined, host('studio'))).toThrow(
        expect.objectContaining({ code: 'usage' }),
      );
  });

  it('refuses a folder that is not there, as on a disk not connected, and says how to restore it anyway', () => {
    expect(() => originalPlace(label, 'letters', host('studio', []))).toThrow(
      expect.objectContaining({
        code: 'not_found',
        message:
          '/home/ann/Documents, where this version was backed up from, is not there: if it is on a disk, connect it; to restore it anyway, name it with --to /home/ann/Documents',
      }),
    );
  });

  it('refuses a path that would lead out of the folder', () => {
    expect(() => originalPlace(label, '../../etc/passwd', host('studio'))).toThrow(
      expect.objectContaining({ code: 'not_found' }),
    );
  });
});
