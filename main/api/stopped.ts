import { EngineError } from './engine-error.ts';

// A long operation (a backup, a restore, a verify) stops when its caller's AbortSignal fires:
// Ctrl-C at the command line, a Stop button in the window. Whatever the engine was doing when
// it noticed (a request in flight, a retry's wait, a file half read), the operation fails with
// `stopped`, through the same paths as any other failure, so it leaves what any failure leaves:
// nothing half-written, and a next run that picks up where this one stopped.

/** The error of work stopped by its caller's signal, before the operation says what stopped. */
export function stoppedError(signal: AbortSignal): EngineError {
  return new EngineError('stopped', 'stopped', { cause: signal.reason });
}

/** Throws `stopped` once `signal` has fired; nothing without a signal. */
export function throwIfStopped(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw stoppedError(signal);
}

/** `work`, or `stopped` as soon as `signal` fires first. */
export async function unlessStopped<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T> {
  if (!signal) return work;
  throwIfStopped(signal);
  let onAbort = (): void => undefined;
  const stopped = new Promise<never>((_, reject) => {
    onAbort = () => reject(stoppedError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  // Should the stop win, nobody awaits `work` any more: its failure, if it fails, comes after
  // the operation's, and must not count as unhandled. Should `work` lose nothing, the race
  // itself reports its failure.
  work.catch(() => undefined);
  try {
    return await Promise.race([work, stopped]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
