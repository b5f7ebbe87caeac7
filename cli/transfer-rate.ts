import { MIN_TRANSFER_BYTES_PER_SECOND } from '../main/service/index.ts';
import { UsageError } from './command-context.ts';

// The rate `--limit-upload` and `--limit-download` name, as people write it: bytes a second in
// the units Canopy prints (2MB, 500kB: powers of 1000), in binary ones (1.5MiB), or in bits as an
// internet plan states its links (10Mbit), with or without "/s"; a number alone is bytes.

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

function refused(option: string, text: string): UsageError {
  return new UsageError(
    `--${option} takes bytes a second (2MB, 500kB, 1.5MiB) or bits (10Mbit), at least ${MIN_TRANSFER_BYTES_PER_SECOND / 1000}kB, not ${JSON.stringify(text)}`,
  );
}

/** The bytes a second `text`, given to `--option`, names, whole. */
export function transferRate(option: 'limit-upload' | 'limit-download', text: string): number {
  const parts = WRITTEN.exec(text.trim());
  const unit = UNITS.get((parts?.[2] ?? '?').toLowerCase());
  if (!parts || unit === undefined) throw refused(option, text);
  const bytes = Math.floor(Number(parts[1]) * unit);
  if (!Number.isSafeInteger(bytes) || bytes < MIN_TRANSFER_BYTES_PER_SECOND)
    throw refused(option, text);
  return bytes;
}

/** `--limit-upload`'s rate, when given, as a request takes it. */
export function uploadLimitOf(text: string | undefined): { uploadBytesPerSecond?: number } {
  return text === undefined ? {} : { uploadBytesPerSecond: transferRate('limit-upload', text) };
}

/** `--limit-download`'s rate, when given, as a request takes it. */
export function downloadLimitOf(text: string | undefined): { downloadBytesPerSecond?: number } {
  return text === undefined ? {} : { downloadBytesPerSecond: transferRate('limit-download', text) };
}
