// A number of bytes as people read it, in the engine's messages and in every host's text.

const UNITS = ['B', 'kB', 'MB', 'GB', 'TB'];

/** Decimal units, as disks and file managers count: 1 500 000 bytes is "1.5 MB". */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${UNITS[unit]}`;
}
