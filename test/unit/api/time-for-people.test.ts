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

  it('gives the offset from UTC of a time the clock shows twice, as summer time ends, and only then', () => {
    inZone('America/New_York');
    // 2026-11-01: at 02:00 EDT the clock goes back to 01:00 EST.
    expect(formatTime(Date.UTC(2026, 10, 1, 4, 59, 59))).toBe('2026-11-01 00:59:59');
    expect(formatTime(Date.UTC(2026, 10, 1, 5, 0, 0))).toBe('2026-11-01 01:00:00 -04:00');
    expect(formatTime(Date.UTC(2026, 10, 1, 5, 30, 0))).toBe('2026-11-01 01:30:00 -04:00');
    expect(formatTime(Date.UTC(2026, 10, 1, 6, 30, 0))).toBe('2026-11-01 01:30:00 -05:00');
    expect(formatTime(Date.UTC(2026, 10, 1, 6, 59, 59))).toBe('2026-11-01 01:59:59 -05:00');
    expect(formatTime(Date.UTC(2026, 10, 1, 7, 0, 0))).toBe('2026-11-01 02:00:00');
    // Set forward, the clock skips an hour and shows none twice.
    expect(formatTime(Date.UTC(2026, 2, 8, 7, 30, 0))).toBe('2026-03-08 03:30:00');
    // Half an hour set back, east of Greenwich.
    inZone('Australia/Lord_Howe');
    expect(formatTime(Date.UTC(2026, 3, 4, 14, 45, 0))).toBe('2026-04-05 01:45:00 +11:00');
    expect(formatTime(Date.UTC(2026, 3, 4, 15, 15, 0))).toBe('2026-04-05 01:45:00 +10:30');
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
