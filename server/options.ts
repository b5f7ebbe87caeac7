import { DEFAULT_KEPT_FREE, DEFAULT_LIMITS, type SizeLimits } from '../main/protocol/index.ts';
import type { KeptFree } from './store/kept-free.ts';

// Every limit of §14 is an option, and the clock is injectable, so conformance tests can run
// with tiny times and small sizes.

export interface TokenBucketOptions {
  /** Tokens added per second. */
  readonly refillPerSecond: number;
  readonly burst: number;
}

export interface ServiceOptions {
  readonly dataDir: string;
  /** Absolute URL the service is reached at, without trailing slash; also the storage host. */
  readonly publicUrl?: string;
  /** Milliseconds since the epoch. */
  readonly clock: () => number;
  readonly limits: SizeLimits;
  readonly uploadWindowMs: number;
  readonly sweepIntervalMs: number;
  readonly uploadFailedRetentionMs: number;
  readonly enrollmentCodeLifetimeMs: number;
  readonly regwaitHoldMs: number;
  readonly registrationRecencyMs: number;
  readonly clockLeewaySeconds: number;
  readonly lastSeenGranularityMs: number;
  readonly outdatedVersionsKept: number;
  /** Per device key or storage authorization; null disables it. */
  readonly credentialRateLimit: TokenBucketOptions | null;
  /** Shared by `/auth/enroll` and `start_regwait`, per client IP; null disables it. */
  readonly ipRateLimit: TokenBucketOptions | null;
  /** Origins allowed by CORS; empty means CORS is off (§16.5). */
  readonly corsOrigins: readonly string[];
  /** Log requests (pino JSON lines to stdout). Secrets are redacted. */
  readonly logRequests: boolean;
  /**
   * Where a service that logs no requests tells its problems (a request failed with HTTP 500,
   * housekeeping failed), as lines a person reads (problem-log.ts): the `serve` command's
   * stderr. Unset (the embedded service), its client's own error tells the user.
   */
  readonly problemLog?: (line: string) => void;
  /**
   * The data folder is on a disk mounted read-only (a backup disk after an unsafe removal): the
   * service serves reads from a copy of its database (store/database-copy.ts), refuses every
   * other request (409, READ_ONLY_MSG), and writes nothing there: no lock, no crash recovery, no
   * sweep or compaction.
   */
  readonly readOnly?: boolean;
  /**
   * Where a read-only service copies its database: a private folder its host removes, even
   * after a kill. By default a folder of the service's own in the system's temporary folder.
   */
  readonly readOnlyCopyDir?: string;
  /**
   * Room left free on the data folder's disk: new data that would dip into it is refused as
   * out of space (store/kept-free.ts); null leaves none.
   */
  readonly keptFree: KeptFree | null;
}

const HOUR = 3_600_000;

export function defaultServiceOptions(dataDir: string): ServiceOptions {
  return {
    dataDir,
    clock: () => Date.now(),
    limits: DEFAULT_LIMITS,
    uploadWindowMs: 24 * HOUR,
    sweepIntervalMs: 60_000,
    uploadFailedRetentionMs: 7 * 24 * HOUR,
    enrollmentCodeLifetimeMs: 24 * HOUR,
    regwaitHoldMs: 20_000,
    registrationRecencyMs: 10 * 60_000,
    clockLeewaySeconds: 20,
    lastSeenGranularityMs: 60_000,
    outdatedVersionsKept: 5,
    credentialRateLimit: { refillPerSecond: 50, burst: 200 },
    ipRateLimit: { refillPerSecond: 10 / 60, burst: 10 },
    corsOrigins: [],
    logRequests: false,
    keptFree: DEFAULT_KEPT_FREE,
  };
}
