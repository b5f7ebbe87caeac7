import { describe, expect, it, onTestFinished } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sourcePlace } from '../../../main/protocol/index.ts';
import { versionPathParts } from '../../../main/restore/version-path.ts';

// A path in a version as a user types it to `canopy ls` and `canopy restore`: from the folder
// backed up, or as the absolute path it had there.

const label = 'studio:/home/ann/Pictures';

describe('versionPathParts', () => {
  it('takes a path from the top of the version, as written or with slashes around', () => {
    expect(versionPathParts(undefined, label)).toEqual([]);
    expect(versionPathParts('', label)).toEqual([]);
    expect(versionPathParts('2019/beach.jpg', label)).toEqual(['2019', 'beach.jpg']);
    expect(versionPathParts('/2019//beach.jpg', label)).toEqual(['2019', 'beach.jpg']);
    expect(versionPathParts('2019/', label)).toEqual(['2019']);
  });

  it('resolves . and .. as a shell would', () => {
    expect(versionPathParts('.', label)).toEqual([]);
    expect(versionPathParts('./2019/./beach.jpg', label)).toEqual(['2019', 'beach.jpg']);
    expect(versionPathParts('2019/../2020/x', label)).toEqual(['2020', 'x']);
    expect(versionPathParts('2019/..', label)).toEqual([]);
  });

  it('refuses a path that leads above the top, naming it', () => {
    for (const above of ['..', '../etc/passwd', '2019/../../x', './..'])
      expect(() => versionPathParts(above, label)).toThrow(
        expect.objectContaining({
          code: 'not_found',
          message: `${above} leads above the top of this version (canopy ls shows what it holds)`,
        }),
      );
  });

  it('takes an absolute path inside the folder backed up from that folder', () => {
    expect(versionPathParts('/home/ann/Pictures', label)).toEqual([]);
    expect(versionPathParts('/home/ann/Pictures/', label)).toEqual([]);
    expect(versionPathParts('/home/ann/Pictures/2019/beach.jpg', label)).toEqual([
      '2019',
      'beach.jpg',
    ]);
    expect(versionPathParts('/home/ann/Pictures/2019/../2020', label)).toEqual(['2020']);
  });

  it('takes any other absolute path from the top: a sibling folder is not inside', () => {
    expect(versionPathParts('/home/ann/Pictures2/x', label)).toEqual([
      'home',
      'ann',
      'Pictures2',
      'x',
    ]);
    expect(versionPathParts('/2019', label)).toEqual(['2019']);
    expect(versionPathParts('/home/ann/Pictures/x', undefined)).toEqual([
      'home',
      'ann',
      'Pictures',
      'x',
    ]);
  });

  it('takes an absolute path in the folder by another path, through links, on its computer', () => {
    const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-version-path-'));
    onTestFinished(() => rmSync(scratch, { recursive: true, force: true }));
    const real = path.join(scratch, 'disk', 'pictures');
    mkdirSync(path.join(real, '2019'), { recursive: true });
    const link = path.join(scratch, 'Pictures');
    symlinkSync(real, link);
    // This computer, as its backups' labels name it (computer-name.ts).
    const here = 'studio';
    const throughLink = `${here}:${link}`;
    // A file deleted from it, to be restored, by the path without the link; and the other way.
    expect(versionPathParts(path.join(real, '2019', 'gone.jpg'), throughLink, here)).toEqual([
      '2019',
      'gone.jpg',
    ]);
    expect(versionPathParts(path.join(link, '2019'), `${here}:${real}`, here)).toEqual(['2019']);
    // Elsewhere, or a folder of another computer, it is a path from the top.
    const fromTop = (given: string): string[] => given.split('/').filter((name) => name !== '');
    expect(versionPathParts(path.join(scratch, 'disk', 'x'), throughLink, here)).toEqual(
      fromTop(path.join(scratch, 'disk', 'x')),
    );
    expect(versionPathParts(path.join(real, '2019'), `elsewhere:${link}`, here)).toEqual(
      fromTop(path.join(real, '2019')),
    );
    // Not told which computer this is: no link is followed.
    expect(versionPathParts(path.join(real, '2019'), throughLink)).toEqual(
      fromTop(path.join(real, '2019')),
    );
  });

  it('takes a path from a version backed up from / as it is', () => {
    expect(versionPathParts('/etc/hosts', 'server:/')).toEqual(['etc', 'hosts']);
  });
});

describe('sourcePlace', () => {
  it('splits a label at its first colon, keeping colons in the folder', () => {
    expect(sourcePlace('studio:/data/a:b')).toEqual({ host: 'studio', folder: '/data/a:b' });
  });

  it('is undefined for a label this client did not write', () => {
    for (const odd of [undefined, 42, '', 'studio', ':/home/ann', 'studio:relative/path'])
      expect(sourcePlace(odd)).toBeUndefined();
  });
});
