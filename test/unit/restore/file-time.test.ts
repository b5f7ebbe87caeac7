import { afterAll, describe, expect, it } from 'vitest';
import {
  closeSync,
  futimesSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { utimes } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { restoredMicroseconds } from '../../../main/protocol/restored-time.ts';
import { fileTime } from '../../../main/restore/file-time.ts';

// A restored file, link or folder gets the microsecond nearest its backed-up time, which a
// version keeps to the nanosecond: through each of the calls a restore sets times with.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-time-'));

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** The microsecond nearest `ns`, in nanoseconds (a half rounds up, to the later time). */
function nearestMicrosecond(ns: bigint): bigint {
  const us = (ns + 500n) / 1000n - (ns + 500n < 0n && (ns + 500n) % 1000n !== 0n ? 1n : 0n);
  return us * 1000n;
}

const times = [
  1_795_768_609_494_205_092n, // a double of it is just under .494205: was restored .494204
  1_795_768_609_800_181_987n,
  1_795_803_004_999_999_999n, // a nanosecond before the next second
  1_795_803_004_999_999_400n, // rounds down, and stays in its second
  1_795_803_004_000_000_500n, // a half rounds up
  1_795_803_004_000_000_499n,
  1_700_000_000_000_000_000n,
  4_102_444_800_123_456_789n, // 2100
  0n,
  999n,
  -1n, // a nanosecond before 1970
  -100_000_000_000n + 123_456_789n, // 1969, with its fraction
  -1_000_000_000n, // a second before 1970, whole
  -500_000_000n,
  -631_152_000_000_000_001n, // 1950, a nanosecond early
];

describe('a restored time', () => {
  it('is the microsecond nearest the backed-up one, for files, links and folders', async () => {
    const file = path.join(scratch, 'file');
    const link = path.join(scratch, 'link');
    const folder = path.join(scratch, 'folder');
    writeFileSync(file, 'x');
    symlinkSync('file', link);
    mkdirSync(folder);
    for (const ns of times) {
      const time = fileTime(ns);
      const fd = openSync(file, 'r+');
      try {
        futimesSync(fd, time, time);
      } finally {
        closeSync(fd);
      }
      lutimesSync(link, time, time);
      await utimes(folder, time, time);
      const wanted = nearestMicrosecond(ns);
      expect(restoredMicroseconds(ns) * 1000n).toBe(wanted);
      for (const entry of [file, link, folder])
        expect(lstatSync(entry, { bigint: true }).mtimeNs, `${ns} on ${entry}`).toBe(wanted);
    }
  });
});
