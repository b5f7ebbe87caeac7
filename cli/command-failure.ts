import { EngineError, type EngineErrorCode } from '../main/api/index.ts';
import { MissingArgument, UsageError } from './command-context.ts';
import { TAKEN } from './command-options.ts';
import { isParseError, parseErrorMessage } from '../main/command-line/index.ts';
import { StoppedBySignal } from './signal-stop.ts';
import { sourceStack } from './source-stack.ts';
import { usageLinesOf } from './usage-text.ts';

// How a `canopy` command that failed says so: on stderr, as a line for people, or with --json as
// one JSON line a script can branch on (its stable code, and whether running it again may help).
// The exit status is the same either way.

/** The code of a failure: the engine's, or one of the command line's own. */
export type FailureCode = EngineErrorCode | 'unexpected';

export interface CommandFailure {
  readonly status: number;
  readonly code: FailureCode;
  readonly message: string;
  /** Whether the same command run again later may succeed (a server down, a busy bucket). */
  readonly retryable: boolean;
  /** The command's lines of the help, for a command line that lacks something or misspells it. */
  readonly usage: readonly string[];
  /** For a failure Canopy did not foresee: where it happened, for a bug report. */
  readonly stack?: string;
}

/**
 * What `error`, which ended command `commandName` (undefined before one was named) run with
 * `argv`, tells the user.
 */
export function commandFailure(
  error: unknown,
  argv: readonly string[],
  commandName: string | undefined,
): CommandFailure {
  if (isParseError(error)) {
    // A parse error comes before the command is known: the first word that names one.
    const named = argv.find((word) => TAKEN.has(word));
    return usageFailure(parseErrorMessage(error), usageLinesOf(named ?? ''));
  }
  if (error instanceof UsageError)
    return usageFailure(
      error.message,
      error instanceof MissingArgument ? usageLinesOf(commandName ?? '') : [],
    );
  if (error instanceof StoppedBySignal)
    return {
      status: error.exitCode,
      code: 'stopped',
      message: error.message,
      retryable: true,
      usage: [],
    };
  if (error instanceof EngineError)
    return {
      status: error.code === 'usage' ? 2 : 1,
      code: error.code,
      message: error.message,
      retryable: error.retryable,
      usage: [],
    };
  const message = error instanceof Error ? error.message : String(error);
  return {
    status: 1,
    code: 'unexpected',
    message: `unexpected failure: ${message}`,
    retryable: false,
    usage: [],
    ...(error instanceof Error && error.stack !== undefined
      ? { stack: sourceStack(error.stack) }
      : {}),
  };
}

function usageFailure(message: string, usage: readonly string[]): CommandFailure {
  return { status: 2, code: 'usage', message, retryable: false, usage };
}

/** The failure as people read it: `canopy: …`, then the command's lines when it has them. */
export function failureText(failure: CommandFailure): string {
  const told =
    failure.stack === undefined ? failure.message : `unexpected failure: ${failure.stack}`;
  const usage = failure.usage.length > 0 ? `usage:\n${failure.usage.join('\n')}\n` : '';
  return `canopy: ${told}\n${usage}`;
}

/** The failure as one JSON line: `{"error":{"code":…,"message":…,"retryable":…}}`. */
export function failureJson(failure: CommandFailure): string {
  const { code, message, retryable, stack } = failure;
  const error = { code, message, retryable, ...(stack === undefined ? {} : { stack }) };
  return `${JSON.stringify({ error })}\n`;
}
