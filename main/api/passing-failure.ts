import { EngineError, isEngineError, type EngineErrorCode } from './engine-error.ts';

// Failures of the link or of the server (the network gone, the server down or overloaded past
// the retries) that stop a backup or a restore part way, and that the same command run again
// later need not meet: it then goes on where the one before stopped.

const PASSING: ReadonlySet<EngineErrorCode> = new Set([
  'network',
  'timeout',
  'server_error',
  'rate_limited',
]);

/** Whether `error` is a failure of the link or the server that a later run may not meet. */
export function isPassingFailure(error: unknown): error is EngineError {
  return isEngineError(error) && PASSING.has(error.code);
}

/** `error`, with `told` added to its message; the same code, whether to retry, and cause. */
export function withMoreSaid(error: EngineError, told: string): EngineError {
  return new EngineError(error.code, `${error.message}; ${told}`, {
    retryable: error.retryable,
    cause: error,
  });
}
