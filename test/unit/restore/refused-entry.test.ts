import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EntryNotRestoredError } from '../../../main/restore/entry-not-restored.ts';
import {
  isModeRefused,
  lstatUnlessRefused,
  refusalOf,
} from '../../../main/restore/refused-entry.ts';

// Which errors of the target's file system refuse one entry (listed, the restore goes on) and
// which stop a restore. The kernel's FAT and exFAT drivers answer EINVAL, which the exFAT
// scenario (through FUSE, which answers ENOENT) cannot show.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-refused-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function systemError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: from the file system`), { code });
}

describe('refusalOf', () => {
  const inFolder = path.join(scratch, 'a:b.txt');

  it.each([
    ['EINVAL', 'name', 'the disk does not accept this name'],
    ['EILSEQ', 'name', 'the disk does not accept this name'],
    ['ENAMETOOLONG', 'name', 'the name is too long for the disk'],
    ['ENOENT', 'name', 'the disk does not accept this name'],
    ['EPERM', 'symlink', 'the disk cannot hold symbolic links'],
    ['ENOSYS', 'symlink', 'the disk cannot hold symbolic links'],
    ['EINVAL', 'symlink', 'the disk does not accept this name'],
  ] as const)('takes %s when giving a %s as a refused entry', (code, kind, reason) => {
    const error = systemError(code);
    const refusal = refusalOf(error, inFolder, kind);
    expect(refusal).toBeInstanceOf(EntryNotRestoredError);
    expect(refusal).toMatchObject({ reason, cause: error });
  });

  it.each([
    ['ENOSPC', 'name'],
    ['EACCES', 'name'],
    ['EPERM', 'name'],
    ['EROFS', 'symlink'],
  ] as const)('passes %s when giving a %s on as it came, to stop the restore', (code, kind) => {
    const error = systemError(code);
    expect(refusalOf(error, inFolder, kind)).toBe(error);
  });

  it('tells a path too long for the system from a name too long for the disk', () => {
    const error = systemError('ENAMETOOLONG');
    const deep = path.join(
      scratch,
      ...Array.from({ length: 41 }, (_, i) => `d${i}`.padEnd(100, '0')),
    );
    expect(refusalOf(error, deep, 'name')).toMatchObject({
      reason:
        'its path is longer than the system lets a program open (4 096 bytes on Linux); restore it into a folder nearer the top',
    });
  });

  it('passes ENOENT on when the folder itself is gone, not the name refused', () => {
    const error = systemError('ENOENT');
    expect(refusalOf(error, path.join(scratch, 'gone', 'file'), 'name')).toBe(error);
  });
});

describe('lstatUnlessRefused', () => {
  it('finds what is there and nothing where no name can be', () => {
    mkdirSync(path.join(scratch, 'there'));
    expect(lstatUnlessRefused(path.join(scratch, 'there'))?.isDirectory()).toBe(true);
    expect(lstatUnlessRefused(path.join(scratch, 'missing'))).toBeUndefined();
    expect(lstatUnlessRefused(path.join(scratch, 'x'.repeat(300)))).toBeUndefined();
  });

  it('still reports an error that is not about the name', () => {
    const loop = path.join(scratch, 'loop');
    symlinkSync('loop', loop);
    expect(() => lstatUnlessRefused(path.join(loop, 'child'))).toThrow(
      expect.objectContaining({ code: 'ELOOP' }),
    );
  });
});

describe('isModeRefused', () => {
  it('takes EPERM (FAT, exFAT) and ENOTSUP as a mode the disk keeps none of, not EACCES', () => {
    expect(isModeRefused(systemError('EPERM'))).toBe(true);
    expect(isModeRefused(systemError('ENOTSUP'))).toBe(true);
    expect(isModeRefused(systemError('EACCES'))).toBe(false);
    expect(isModeRefused(systemError('ENOSPC'))).toBe(false);
  });
});
