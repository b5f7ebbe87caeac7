import { EngineError } from '../api/index.ts';

// A version's metadata CAR holds a node for every file and folder of its source, about 160
// bytes each, and the service takes at most 128 MiB of it (§14): a source of more than about
// 800 000 files cannot be one version. Nothing was stored; what helps is a smaller source.

const MiB = 1024 * 1024;
/** A tree's metadata per file, as measured on trees of small files with short names. */
const BYTES_PER_FILE = 160;

/** About how many files fit in `limitBytes`: rounded down to one significant digit. */
function filesWithin(limitBytes: number): string {
  const files = limitBytes / BYTES_PER_FILE;
  const step = 10 ** Math.floor(Math.log10(Math.max(files, 1)));
  return (Math.floor(files / step) * step).toLocaleString('en-US');
}

/**
 * Why a source whose tree is too large for one version cannot be backed up, and what to do:
 * `limitBytes` is the limit the client found passed, undefined when the service refused the
 * metadata CAR itself (a service configured with a lower limit).
 */
export function sourceTooLargeReason(sourceDir: string, limitBytes?: number): string {
  const limit =
    limitBytes === undefined
      ? 'more than the server takes for one version'
      : `more than ${limitBytes >= MiB ? `${Math.floor(limitBytes / MiB)} MiB` : `${limitBytes} bytes`}, the most one version can hold (roughly ${filesWithin(limitBytes)} files)`;
  return `${sourceDir} holds too many files and folders for one backup: the list of their names, sizes and times is ${limit}; back up some of its subfolders to buckets of their own, or exclude some in a .canopyignore file`;
}

/** The error of a backup refused for sourceTooLargeReason: it stored nothing. */
export function sourceTooLarge(sourceDir: string, limitBytes?: number): EngineError {
  return new EngineError(
    'source_too_large',
    `${sourceTooLargeReason(sourceDir, limitBytes)}. Nothing was stored`,
  );
}
