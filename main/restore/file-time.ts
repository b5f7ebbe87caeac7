// A restored entry's mtime, as Node's utimes calls take it: a number of seconds, which libuv
// turns into the file's time by cutting it to the microsecond (uv__fs_to_timespec). A version
// keeps the time to the nanosecond; as a double of today's seconds it is known to about 0.24 µs,
// so passed as it is, a time just past a whole microsecond could land a microsecond early and
// one just before the next second on that second. The time passed here is the middle of the
// microsecond nearest the version's time, which the cut then gives exactly: a restored file is
// never more than half a microsecond off (the comparison of versions counts on it,
// version-diff.ts), until past the year 2200, when a double's seconds lose the microsecond.
//
// Node also puts the current time in place of a negative number: a file from before 1970 came
// back dated today. A Date would be taken, but only to the millisecond. A numeric string is
// passed on as it is, negative too. libuv cuts a negative time toward zero, so the middle of the
// microsecond is reached from the other side.

import { dividedRoundingDown, restoredMicroseconds } from '../protocol/index.ts';

const US_PER_S = 1_000_000n;

/** What to pass Node's utimes calls for an entry to get restoredMicroseconds(nanoseconds). */
export function fileTime(nanoseconds: bigint): number | string {
  const microseconds = restoredMicroseconds(nanoseconds);
  const seconds = dividedRoundingDown(microseconds, US_PER_S);
  const fraction = Number(microseconds - seconds * US_PER_S);
  if (seconds >= 0n) return Number(seconds) + (fraction + 0.5) / 1e6;
  return String(Number(seconds) + (fraction - 0.5) / 1e6);
}
