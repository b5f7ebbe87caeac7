import path from 'node:path';
import { EngineError, isDiskGone } from '../api/index.ts';

// A backup's source or a restore's target on a disk that stopped answering (pulled out while in
// use, or failing) would reach the user as Node's bare "ENOTCONN: socket is not connected,
// close", or, when the upload was reading the source, as the service being unreachable. Neither
// names the disk or what to do. Mapped here for both.

/** The disk error that `error` is, or was caused by; undefined for any other failure. */
function diskFailureIn(error: unknown): NodeJS.ErrnoException | undefined {
  let cause: unknown = error;
  // An upload's body that failed to read reaches here wrapped twice: fetch's, then the client's.
  for (let depth = 0; depth < 4 && cause instanceof Error; depth += 1) {
    if (isDiskGone(cause) || (cause as NodeJS.ErrnoException).code === 'EIO') return cause;
    cause = cause.cause;
  }
  return undefined;
}

/**
 * `error` as `disk_unavailable` where it is (or was caused by) a disk that stopped answering,
 * naming `folder` (the source or the target) unless the failed path lies elsewhere; other
 * errors pass.
 */
export function diskGoneError(error: unknown, folder: string, what: 'backup' | 'restore'): unknown {
  if (error instanceof EngineError && error.code !== 'network') return error;
  const failure = diskFailureIn(error);
  if (!failure) return error;
  const failed = failure.path === undefined ? undefined : path.resolve(failure.path);
  const inFolder =
    failed === undefined || failed === folder || failed.startsWith(folder + path.sep);
  const where = inFolder ? folder : path.dirname(failed);
  return new EngineError(
    'disk_unavailable',
    `the disk holding ${where} stopped answering during the ${what} (${failure.code ?? 'EIO'}): connect it, or check it for errors, and run the ${what} again`,
    { cause: error },
  );
}
