// A moment as people read it, in the engine's messages and in every host's text: on this
// computer's clock, to the second, the way `--at` takes it back (2026-11-30 12:22:24). An ISO
// string in UTC with its milliseconds (2026-11-30T11:22:24.000Z) is exact but makes everyone
// east or west of Greenwich do sums, and its ".000" is noise: the service counts in seconds.
//
// When summer time ends the clock shows an hour twice: a time in it is told with its offset
// from UTC (2026-11-01 01:30:00 -05:00), so that it names one moment, typed back too.

const MINUTE_MS = 60_000;
/** Longer than any shift of a clock, shorter than the time between two. */
const AROUND_MS = 12 * 60 * MINUTE_MS;

function twoDigits(value: number): string {
  return String(Math.abs(value)).padStart(2, '0');
}

/** This computer's offset from UTC at `ms`, in minutes east of it (+60 for UTC+01:00). */
function offsetAt(ms: number): number {
  return -new Date(ms).getTimezoneOffset();
}

/** The date and time the clock shows at `at`, to the second. */
function wallClock(at: Date): string {
  const day = `${String(at.getFullYear()).padStart(4, '0')}-${twoDigits(at.getMonth() + 1)}-${twoDigits(at.getDate())}`;
  return `${day} ${twoDigits(at.getHours())}:${twoDigits(at.getMinutes())}:${twoDigits(at.getSeconds())}`;
}

/** Whether the clock shows `shown`, the time at `ms`, at another moment too: it was set back. */
function shownTwice(ms: number, shown: string): boolean {
  const setBack = offsetAt(ms - AROUND_MS) - offsetAt(ms + AROUND_MS);
  // Not `<= 0`: past the dates a Date holds, the offsets are NaN.
  if (!(setBack > 0)) return false;
  return [ms - setBack * MINUTE_MS, ms + setBack * MINUTE_MS].some(
    (other) => wallClock(new Date(other)) === shown,
  );
}

/**
 * `ms` (since 1970) as a date and time on this computer's clock, to the second; with its offset
 * from UTC when the clock shows that time twice.
 */
export function formatTime(ms: number): string {
  const at = new Date(ms);
  if (Number.isNaN(at.getTime())) return String(ms);
  const shown = wallClock(at);
  if (!shownTwice(ms, shown)) return shown;
  const offset = offsetAt(ms);
  const sign = offset < 0 ? '-' : '+';
  return `${shown} ${sign}${twoDigits(Math.trunc(offset / 60))}:${twoDigits(offset % 60)}`;
}
