import type { EngineErrorCode } from '../main/api/index.ts';
import type { Engine } from '../main/index.ts';
import type { ProgressPrinter, ProgressView } from './progress-printer.ts';

// What each `canopy` command is given (cli/commands/), and the few helpers they share to read
// their arguments and print.

/** A command line that cannot be run as given: told with the usage exit status (2). */
export class UsageError extends Error {}

/** A word or option the command needs was left out: told with the command's usage lines. */
export class MissingArgument extends UsageError {}

/** Where a command's result goes: the human text, or with --json the data as one JSON line. */
export interface Output {
  json: boolean;
  print(human: string, data: unknown): void;
  /**
   * A long listing: `lines` (each without its newline), or with --json `items` as one JSON
   * array; written a part at a time (listing-output.ts). `lines` is read only for the text.
   */
  printEach(lines: Iterable<string>, items: readonly unknown[]): void;
  /** Writes `text` as it is: a part of an output made as it goes (canopy diff). */
  write(text: string): void;
}

export interface CommandContext {
  readonly engine: Engine;
  /** The word after the command: a subcommand, or the command's first argument. */
  readonly sub: string | undefined;
  /** The words after that. */
  readonly rest: readonly string[];
  readonly values: Readonly<Record<string, string | boolean | string[] | undefined>>;
  readonly out: Output;
  /** The option `name` when given once as text. */
  readonly str: (name: string) => string | undefined;
  /** The option `name`, given any number of times. */
  readonly strings: (name: string) => string[];
  /** Progress in place on a terminal (unless the output is JSON), or as lines with --progress. */
  readonly progressShown: <Progress>(view: ProgressView<Progress>) => ProgressPrinter<Progress>;
  /**
   * Refuses any word past the first `count` after the command's name (its subcommand counted):
   * one left over would be a request dropped without a word. `canopy restore a b` restored `a`
   * alone, and `canopy buckets create My Photos` made a bucket named "My".
   */
  readonly takesWords: (count: number) => void;
}

/** Runs one command; its exit status when that is not 0 without an error (a partial restore). */
export type Command = (command: CommandContext) => Promise<number | undefined>;

/** The usage error for words a command does not take. */
export function unexpectedWords(extra: readonly string[]): UsageError {
  const words = extra.map((word) => JSON.stringify(word)).join(' ');
  return new UsageError(
    `unexpected ${extra.length === 1 ? 'argument' : 'arguments'} ${words} (a name with spaces goes in quotes)`,
  );
}

export function need(value: string | undefined, what: string): string {
  if (value === undefined || value === '') throw new MissingArgument(`${what} is required`);
  return value;
}

export function oneOf<T extends string>(
  value: string | undefined,
  what: string,
  options: readonly T[],
): T {
  if (value === undefined || !(options as readonly string[]).includes(value)) {
    const told = `${what} must be one of ${options.join(', ')}`;
    throw value === undefined ? new MissingArgument(told) : new UsageError(told);
  }
  return value as T;
}

/** Why a listing shows what was seen last rather than the service's answer. */
export function offlineReason(code: EngineErrorCode | null): string {
  switch (code) {
    case 'local_data_missing':
      return 'the disk holding the backups is not connected';
    case 'untrusted_server':
      return "this computer does not trust the server's certificate (canopy buckets says why)";
    case 'proxy_refused':
      return 'the proxy would not reach the server (canopy buckets says why)';
    case 'redirected':
      return 'the server sends Canopy elsewhere (canopy buckets says where)';
    case 'not_canopy_server':
      return 'the server does not answer as a Canopy server (canopy buckets says how)';
    default:
      return 'the server cannot be reached';
  }
}

/**
 * Rows as columns padded to their widest cell. The widths are taken row by row: spread into
 * Math.max, the cells of `canopy ls -R` over 300 000 files overflowed the stack.
 */
export function table(rows: readonly (readonly string[])[]): string {
  if (rows.length === 0) return '';
  const widths: number[] = [];
  for (const row of rows)
    for (const [column, cell] of row.entries())
      widths[column] = Math.max(widths[column] ?? 0, cell.length);
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
