import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import { diskGoneError } from '../../../main/engine/disk-gone-error.ts';

// The disk named when a source or target stops answering: the folder the user gave, unless
// the call that failed was on a path elsewhere.

function errno(code: string, path?: string): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(`${code}: failed`);
  error.code = code;
  if (path !== undefined) error.path = path;
  return error;
}

describe('diskGoneError', () => {
  it('names the source or target, or the folder of a failed path outside it', () => {
    const named = (error: unknown): string =>
      (diskGoneError(error, '/media/stick', 'backup') as Error).message;
    expect(named(errno('ENOTCONN'))).toBe(
      'the disk holding /media/stick stopped answering during the backup (ENOTCONN): connect it, or check it for errors, and run the backup again',
    );
    expect(named(errno('EIO', '/media/stick/photos/a.jpg'))).toMatch(
      /^the disk holding \/media\/stick stopped answering during the backup \(EIO\)/,
    );
    expect(named(errno('ENODEV', '/media/stick-2/a.jpg'))).toMatch(
      /^the disk holding \/media\/stick-2 stopped answering/,
    );
    expect(diskGoneError(errno('ENXIO'), '/media/stick', 'restore')).toMatchObject({
      code: 'disk_unavailable',
    });
  });

  it('lets every other error pass as it is', () => {
    const denied = errno('EACCES', '/media/stick/a.jpg');
    expect(diskGoneError(denied, '/media/stick', 'backup')).toBe(denied);
    const told = new EngineError('network', 'cannot reach the server');
    expect(diskGoneError(told, '/media/stick', 'backup')).toBe(told);
  });
});
