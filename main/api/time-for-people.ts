// A moment as people read it, in the engine's messages and in every host's text: on this
// computer's clock, to the second, the way `--at` takes it back (2026-11-30 12:22:24). An ISO
// string in UTC with its milliseconds (2026-11-30T11:22:24.000Z) is exact but makes everyone
// east or west of Greenwich do sums, and its ".000" is noise: the service counts in seconds.

function twoDigits(value: number): string {
  return String(value).padStart(2, '0');
}

/** `ms` (since 1970) as a date and time on this computer's clock, to the second. */
export function formatTime(ms: number): string {
  const at = new Date(ms);
  if (Number.isNaN(at.getTime())) return String(ms);
  const day = `${String(at.getFullYear()).padStart(4, '0')}-${twoDigits(at.getMonth() + 1)}-${twoDigits(at.getDate())}`;
  return `${day} ${twoDigits(at.getHours())}:${twoDigits(at.getMinutes())}:${twoDigits(at.getSeconds())}`;
}
