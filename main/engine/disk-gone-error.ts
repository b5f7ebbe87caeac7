import path from 'node:path';
import { EngineError, isDiskGone } from '../api/index.ts';

// A backup's source or a restore's target on a disk that stopped answering (pulled out while in
// use, or failing) would reach the user as Node's bare "ENOTCONN: socket is not connected,
// close", which names neither the disk nor what to do. Mapped here for both.

/**
 * `error` as `disk_unavailable` where it is a disk that stopped answering, naming `folder`
 * (the source or the target) unless the failed path lies elsewhere; other errors pass.
 */
export function diskGoneError(error: unknown, folder: string, what: 'backup' | 'restore'): unknown {
  if (error instanceof EngineError || !isDiskGone(error)) return error;
  const failed = error.path === undefined ? undefined : path.resolve(error.path);
  const inFolder =
    failed === undefined || failed === folder || failed.startsWith(folder + path.sep);
  const where = inFolder ? folder : path.dirname(failed);
  return new EngineError(
    'disk_unavailable',
    `the disk holding ${where} stopped answering during the ${what} (${error.code ?? 'EIO'}): connect it, or check it for errors, and run the ${what} again`,
    { cause: error },
  );
}
