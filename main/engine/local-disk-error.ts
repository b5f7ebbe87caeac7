import { EngineError, isEngineError } from '../api/index.ts';
import { DEFAULT_KEPT_FREE, OUT_OF_SPACE_MSG } from '../protocol/index.ts';
import { readAccount, type StateDb } from '../state/index.ts';
import type { ServiceConnection } from './service-connection.ts';
import { UNREACHABLE } from './unreachable.ts';

/** The embedded service's room kept free on the backup disk, as the user is told it. */
const KEPT_FREE_TEXT = `${DEFAULT_KEPT_FREE.fraction * 100} % of it, at most ${DEFAULT_KEPT_FREE.maxBytes / (1 << 30)} GiB,`;

/**
 * `error` told as what happened to the embedded service's disk, where that is why a request
 * failed: pulled out during a backup or restore, the service answers 500 (or no longer
 * answers) for every write and read; full, it answers 500 "out of storage space", which for a
 * server is its operator's to fix, and here is the user's own disk. Other errors pass as
 * they are.
 */
export function toldAsLocalDisk(
  error: unknown,
  what: 'backup' | 'restore',
  db: StateDb,
  connection: ServiceConnection,
): unknown {
  const account = readAccount(db);
  const failedRequest = isEngineError(error) && UNREACHABLE.has(error.code);
  if (!failedRequest || account?.mode !== 'local') return error;
  const disk = `the disk holding the backups (${account.local_data_dir ?? ''})`;
  // A backup's confirmed shards and earlier versions are kept; a restore promises nothing.
  const kept = what === 'backup' ? '; what it stored before stays' : '';
  if (error.code === 'server_error' && error.message.includes(OUT_OF_SPACE_MSG)) {
    return new EngineError(
      'disk_full',
      `${disk} is full (the backups leave ${KEPT_FREE_TEXT} free for other files): free some space on it, then run the ${what} again${kept}`,
      { cause: error },
    );
  }
  if (connection.localService?.holdsData?.() !== false) return error;
  return new EngineError(
    'local_data_missing',
    `${disk} went away during the ${what}: connect it and run the ${what} again${kept}`,
    { cause: error },
  );
}
