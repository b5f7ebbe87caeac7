import { UsageError } from './command-context.ts';

// The time `--at` names, as people write it: a day (2026-11-20), until its end, so that a
// version made that evening is the day's; or a moment (2026-11-20T14:30, or with a space), on
// this computer's clock unless it ends in Z or an offset (+01:00, after a space too).
// JavaScript's own Date.parse reads a day alone as midnight in UTC, which on this side of
// Greenwich is the day before, and carries 2026-02-30 over into March: the parts are checked
// here first.

const WRITTEN =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,3})?)?(?: ?(Z|[+-]\d{2}:\d{2}))?)?$/;

function refused(text: string): UsageError {
  return new UsageError(
    `--at takes a day (2026-11-20) or a time (2026-11-20T14:30, this computer's time unless it ends in Z or +01:00), not ${JSON.stringify(text)}`,
  );
}

/** Whether the calendar has that day (month 1 to 12). */
function dayExists(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** The moment `text` names (a day's last), in milliseconds since 1970. */
export function atTime(text: string): number {
  const parts = WRITTEN.exec(text);
  if (!parts) throw refused(text);
  const [year, month, day] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (!dayExists(year, month, day)) throw refused(text);
  if (parts[4] === undefined) return new Date(year, month - 1, day, 23, 59, 59, 999).getTime();
  if (Number(parts[4]) > 23 || Number(parts[5]) > 59 || Number(parts[6] ?? 0) > 59)
    throw refused(text);
  // With no zone, Date.parse takes a date and time on this computer's clock. Its zone may
  // follow a space, as Canopy tells a time the clock showed twice (time-for-people.ts).
  const ms = Date.parse(text.replace(/^(.{10}) /, '$1T').replace(/ (?=[Z+-])/, ''));
  if (Number.isNaN(ms)) throw refused(text);
  return ms;
}
