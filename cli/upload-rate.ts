import { MIN_UPLOAD_BYTES_PER_SECOND } from '../main/service/index.ts';
import { UsageError } from './command-context.ts';

// The rate `--limit-upload` names, as people write it: bytes a second in the units Canopy prints
// (2MB, 500kB: powers of 1000), in binary ones (1.5MiB), or in bits as an internet plan states
// its uplink (10Mbit), with or without "/s"; a number alone is bytes.

const WRITTEN = /^(\d+(?:\.\d+)?) ?([a-z]*?)(?:\/s)?$/i;

/** Bytes a second of one of each unit, by its name in lower case. */
const UNITS: ReadonlyMap<string, number> = new Map([
  ['', 1],
  ['b', 1],
  ['k', 1e3],
  ['kb', 1e3],
  ['m', 1e6],
  ['mb', 1e6],
  ['g', 1e9],
  ['gb', 1e9],
  ['kib', 1 << 10],
  ['mib', 1 << 20],
  ['gib', 1 << 30],
  ['kbit', 1e3 / 8],
  ['mbit', 1e6 / 8],
  ['gbit', 1e9 / 8],
]);

function refused(text: string): UsageError {
  return new UsageError(
    `--limit-upload takes bytes a second (2MB, 500kB, 1.5MiB) or bits (10Mbit), at least ${MIN_UPLOAD_BYTES_PER_SECOND / 1000}kB, not ${JSON.stringify(text)}`,
  );
}

/** The bytes a second `text` names, whole. */
export function uploadRate(text: string): number {
  const parts = WRITTEN.exec(text.trim());
  const unit = UNITS.get((parts?.[2] ?? '?').toLowerCase());
  if (!parts || unit === undefined) throw refused(text);
  const bytes = Math.floor(Number(parts[1]) * unit);
  if (!Number.isSafeInteger(bytes) || bytes < MIN_UPLOAD_BYTES_PER_SECOND) throw refused(text);
  return bytes;
}
