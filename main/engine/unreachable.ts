import { EngineError } from '../api/index.ts';
import type { RetryPolicy } from '../service/index.ts';

// What the engine does when the service cannot answer: lookups that have something to show
// from this device (the account as enrolled, the versions as last listed, a version's tree
// from the cache) try once, and show that on these failures.

/** A single attempt, for lookups that have a local fallback rather than a reason to wait. */
export const NO_RETRY: RetryPolicy = { attempts: 1, baseDelayMs: 0, maxDelayMs: 0 };

/**
 * Failures that mean the service cannot be reached or cannot answer right now; for the local
 * service, also its data folder's disk not plugged in.
 */
export const UNREACHABLE: ReadonlySet<string> = new Set([
  'network',
  'timeout',
  'local_server',
  'local_data_missing',
  'server_error',
  // Not reached from here for a reason that asking again does not change: still unreachable.
  'untrusted_server',
  'proxy_refused',
  'redirected',
  'not_canopy_server',
]);

/**
 * `unreachable`, the failure to reach the service, told together with why it was asked at all:
 * the copy of version `versionId` this computer keeps was found `damaged`, and only the service
 * can give it again. It keeps `unreachable`'s code, so that a script sees a later run may do.
 */
export function unreachableWithDamagedCopy(
  versionId: string,
  damaged: EngineError,
  unreachable: EngineError,
): EngineError {
  return new EngineError(
    unreachable.code,
    `${unreachable.message}, so version ${versionId} cannot be fetched again in place of the copy this computer keeps, found damaged (${damaged.message})`,
    { retryable: unreachable.retryable, cause: unreachable },
  );
}
