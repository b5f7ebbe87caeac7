import { describe, expect, it } from 'vitest';
import { atTime } from '../../../cli/at-time.ts';
import { formatTime } from '../../../main/api/index.ts';
import { UsageError } from '../../../cli/command-context.ts';

// `--at TIME` as people write it: a day stands for all of it, on this computer's clock, and a
// day the calendar does not have is refused rather than carried into the next month.

describe('the time --at names', () => {
  it('is the last moment of a day given alone, on this computer clock', () => {
    expect(atTime('2026-11-20')).toBe(new Date(2026, 10, 20, 23, 59, 59, 999).getTime());
    expect(atTime('2024-02-29')).toBe(new Date(2024, 1, 29, 23, 59, 59, 999).getTime());
  });

  it('is the moment a time names, on this computer clock unless it gives its zone', () => {
    expect(atTime('2026-11-20T14:30')).toBe(new Date(2026, 10, 20, 14, 30).getTime());
    expect(atTime('2026-11-20 14:30:05')).toBe(new Date(2026, 10, 20, 14, 30, 5).getTime());
    expect(atTime('2026-11-20T14:30:05.250Z')).toBe(Date.UTC(2026, 10, 20, 14, 30, 5, 250));
    expect(atTime('2026-11-20T14:30+01:00')).toBe(Date.UTC(2026, 10, 20, 13, 30));
  });

  it('takes back each time Canopy tells, the hour the clock shows twice too', () => {
    const zoneBefore = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      expect(atTime('2026-11-01 01:30:00 -05:00')).toBe(Date.UTC(2026, 10, 1, 6, 30));
      // Every 7 minutes and 3 seconds over the day summer time ends, to the second as told.
      for (let ms = Date.UTC(2026, 10, 1, 0); ms < Date.UTC(2026, 10, 2, 0); ms += 423_000)
        expect(atTime(formatTime(ms)), formatTime(ms)).toBe(ms);
    } finally {
      if (zoneBefore === undefined) delete process.env.TZ;
      else process.env.TZ = zoneBefore;
    }
  });

  it('refuses what names no moment, saying what it takes', () => {
    for (const text of [
      '2026-02-30',
      '2025-02-29',
      '2026-13-01',
      '2026-11-20T24:00',
      '2026-11-20T14:60',
      '2026-11-20T14',
      'yesterday',
      '20/11/2026',
      '',
    ]) {
      expect(() => atTime(text), text).toThrow(UsageError);
      expect(() => atTime(text), text).toThrow(
        `--at takes a day (2026-11-20) or a time (2026-11-20T14:30, this computer's time unless it ends in Z or +01:00), not ${JSON.stringify(text)}`,
      );
    }
  });
});
