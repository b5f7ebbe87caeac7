import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import { stoppedPartWay } from '../../../main/restore/stopped-part-way.ts';

// What a restore's failure says of the files it wrote before: a network or server failure
// names them as in place, to be completed by running it again; other failures, and any
// failure before a file was written, are told as they came.

const unreachable = new EngineError('network', 'cannot reach https://backup.example.org', {
  retryable: true,
});

describe('stoppedPartWay', () => {
  it('names the files and links in place, keeping the code and whether to retry', () => {
    const told = stoppedPartWay(unreachable, { files: 3, symlinks: 2 }, '/home/ann/back');
    expect(told).toMatchObject({ code: 'network', retryable: true, cause: unreachable });
    expect((told as Error).message).toBe(
      'cannot reach https://backup.example.org; the restore stopped part way: the 5 files and links it restored are in place in /home/ann/back, and running it again brings the rest',
    );
  });

  it('says "the file" or "the link" for one', () => {
    const one = (files: number, symlinks: number): string =>
      (stoppedPartWay(unreachable, { files, symlinks }, '/t') as Error).message;
    expect(one(1, 0)).toContain(': the file it restored is in place in /t,');
    expect(one(0, 1)).toContain(': the link it restored is in place in /t,');
    expect(one(2, 0)).toContain(': the 2 files it restored are in place in /t,');
  });

  it('leaves a failure before anything was written, and one a new run would meet again, as it came', () => {
    expect(stoppedPartWay(unreachable, { files: 0, symlinks: 0 }, '/t')).toBe(unreachable);
    const denied = new EngineError('permission_denied', 'cannot write in /t: permission denied');
    expect(stoppedPartWay(denied, { files: 4, symlinks: 0 }, '/t')).toBe(denied);
    const bug = new Error('unexpected');
    expect(stoppedPartWay(bug, { files: 4, symlinks: 0 }, '/t')).toBe(bug);
  });
});
