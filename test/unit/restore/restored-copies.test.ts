import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { extensionOf, restoredName } from '../../../main/restore/restored-copies.ts';

// The names a restore gives a copy it puts beside what it keeps: a file's extension stays last,
// so that the copy still opens in its program.

describe('the name of a restored copy', () => {
  it('puts the suffix before a file or link’s extension, and at the end of a folder’s name', () => {
    const folder = path.join('/home', 'ann', 'Pictures');
    expect(restoredName(path.join(folder, 'beach.jpg'), 1, 'file or link')).toBe(
      path.join(folder, 'beach (restored).jpg'),
    );
    expect(restoredName(path.join(folder, 'beach.jpg'), 3, 'file or link')).toBe(
      path.join(folder, 'beach (restored 3).jpg'),
    );
    expect(restoredName(path.join(folder, 'photos.2019'), 1, 'folder')).toBe(
      path.join(folder, 'photos.2019 (restored)'),
    );
  });

  it('keeps two extensions that go together, and none where the name has none', () => {
    expect(extensionOf('notes.tar.gz')).toBe('.tar.gz');
    expect(extensionOf('NOTES.TAR.XZ')).toBe('.TAR.XZ');
    expect(extensionOf('song.mp3.part')).toBe('.part');
    expect(extensionOf('.bashrc')).toBe('');
    expect(extensionOf('Makefile')).toBe('');
    expect(extensionOf('ends in a dot.')).toBe('');
    expect(extensionOf('report.final draft')).toBe('');
    expect(extensionOf(`x.${'e'.repeat(40)}`)).toBe('');
    expect(restoredName('/d/.bashrc', 1, 'file or link')).toBe('/d/.bashrc (restored)');
    expect(restoredName('/d/backup.tar.gz', 2, 'file or link')).toBe(
      '/d/backup (restored 2).tar.gz',
    );
  });

  it('shortens a long name before its suffix, to the 255 bytes a disk takes', () => {
    const copy = path.basename(restoredName(`/d/${'é'.repeat(125)}.jpg`, 1, 'file or link'));
    expect(copy).toBe(`${'é'.repeat(120)} (restored).jpg`);
    expect(Buffer.byteLength(copy)).toBe(255);
  });
});
