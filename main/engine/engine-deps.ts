import type { SecretStore } from '../identity/index.ts';
import type { RetryPolicy } from '../service/index.ts';

/** Canopy's embedded Bucket Storage Service, running on loopback for one data folder. */
export interface LocalService {
  readonly url: string;
  /**
   * Its data is on a disk mounted read-only: it serves browsing, restores and verifies, and
   * refuses the rest (409 READ_ONLY_MSG). The engine refuses a backup before packing.
   */
  readonly readOnly?: boolean;
  /** A Unix socket the service also answers on; the engine sends its own requests there. */
  readonly socketPath?: string;
  /** An enrollment code for the folder's one local user, creating the user on first use. */
  enrollmentCode(): Promise<string>;
  /**
   * Whether its data folder is still there: false once its disk was pulled out, so that a
   * failed request can be told as that rather than as the service's failure.
   */
  holdsData?(): boolean;
  /**
   * Whether its data folder is still the one it opened, as it opened it: false once the folder
   * is gone, is on another mount (its disk pulled out and plugged in again: what the service
   * has open is on the mount that went), or is mounted with other write access. A long-lived
   * engine (the daemon, the app) then starts the service anew.
   */
  matchesDisk?(): boolean;
  /**
   * Set when this start found the service's database damaged, and put the copy kept of it in
   * its place: the damaged one is kept as `setAsideAs`; what was recorded after the copy was
   * made (epoch ms) is not in it.
   */
  readonly restoredDatabase?: { readonly setAsideAs: string; readonly copyMadeAt: number };
  close(): Promise<void>;
}

/**
 * Every side effect the engine uses, wired by its host (CLI, daemon, Electron app).
 * - home: the Canopy home folder (state database, logs; never secrets).
 * - secrets: where private keys live.
 * - startLocalService: runs the embedded service; the host owns `server/`, the engine does not.
 * - clock: milliseconds since the epoch.
 */
export interface EngineDeps {
  readonly home: string;
  readonly secrets: SecretStore;
  /**
   * Starts the service on `dataDir`. With `create`, a missing or empty folder gets a new service;
   * without, it is refused (EngineError `local_data_missing`) and left as it is.
   */
  readonly startLocalService?: (
    dataDir: string,
    options: { readonly create: boolean },
  ) => Promise<LocalService>;
  readonly clock?: () => number;
  readonly retry?: RetryPolicy;
  /**
   * How long a backup, a restore or a verify under way tries a request through an outage of
   * the service, past `retry`'s attempts; OUTAGE_BUDGET_MS (10 min) when not given.
   */
  readonly outageBudgetMs?: number;
  /** Largest shard, fixed; by default each bucket's shards follow its upload speed (shardTargetFor). */
  readonly shardTargetBytes?: number;
  /** Test seam: runs after a file was read during a backup, before it is checked for changes. */
  readonly afterFileRead?: (relativePath: string) => Promise<void>;
  /** Test seam for crash-point tests: called once the upload is queued (0), then per confirmed shard. */
  readonly afterShardConfirmed?: (confirmedSoFar: number) => void;
  /** Test seam for crash-point tests: a restored file is written whole, before its rename. */
  readonly afterFileRestored?: (writtenSoFar: number) => void;
  /**
   * Test seam: the largest metadata CAR a backup makes, and so the largest a pull takes; by
   * default the spec's (§14, 128 MiB), which takes a source of some 800 000 files to reach.
   */
  readonly metadataLimitBytes?: number;
  /** What the metadata cache may hold; by default METADATA_CACHE_BUDGET_BYTES (2 GiB). */
  readonly metadataCacheBytes?: number;
  /** Where `login --local` keeps the service's data when no folder is given. */
  readonly defaultLocalDataDir?: string;
}
