import { afterEach, describe, expect, it } from 'vitest';
import { formatTime } from '../../../main/api/index.ts';

// Times are told on the computer's clock, to the second, in the form `--at` takes back.

const zoneBefore = process.env.TZ;

function inZone(zone: string): void {
  // Node reads TZ again whenever it is set.
  process.env.TZ = zone;
}

afterEach(() => {
  if (zoneBefore === undefined) delete process.env.TZ;
  else process.env.TZ = zoneBefore;
});

describe('a time told to people', () => {
  it('is on this computer clock, not in UTC', () => {
    inZone('Asia/Kolkata');
    expect(formatTime(0)).toBe('1970-01-01 05:30:00');
    inZone('America/New_York');
    expect(formatTime(Date.UTC(2026, 10, 30, 11, 22, 24))).toBe('2026-11-30 06:22:24');
    // Summer time is the clock's too.
    expect(formatTime(Date.UTC(2026, 6, 1, 12, 0, 0))).toBe('2026-07-01 08:00:00');
  });

  it('drops the part of a second rather than round into the next minute or day', () => {
    inZone('UTC');
    expect(formatTime(Date.UTC(1999, 11, 31, 23, 59, 59, 999))).toBe('1999-12-31 23:59:59');
  });

  it('tells the years of old files in four digits, before 1970 too', () => {
    inZone('UTC');
    expect(formatTime(Date.UTC(1901, 11, 14, 20, 45, 52))).toBe('1901-12-14 20:45:52');
    expect(formatTime(new Date('0042-03-04T05:06:07Z').getTime())).toBe('0042-03-04 05:06:07');
  });

  it('tells a time no calendar holds as the number it was given', () => {
    expect(formatTime(Number.NaN)).toBe('NaN');
    expect(formatTime(9e15)).toBe('9000000000000000');
  });
});
