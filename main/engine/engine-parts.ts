import type { StateDb } from '../state/index.ts';
import type { BucketCatalog } from './bucket-catalog.ts';
import type { BucketVersions } from './bucket-versions.ts';
import type { EngineDeps } from './engine-deps.ts';
import type { MetadataCache } from './metadata-cache.ts';
import type { ServiceConnection } from './service-connection.ts';
import type { VersionRetention } from './version-retention.ts';

/**
 * What the engine's runs (backup, browse, verify, restore) share: its host's deps, the state
 * database, the one connection to the service, the metadata cache, the bucket catalog,
 * versions and their retention, and the clock.
 */
export interface EngineParts {
  readonly deps: EngineDeps;
  readonly db: StateDb;
  readonly connection: ServiceConnection;
  readonly metadata: MetadataCache;
  readonly buckets: BucketCatalog;
  readonly versions: BucketVersions;
  readonly retention: VersionRetention;
  readonly now: () => number;
  /** This computer's name in source labels (computer-name.ts). */
  readonly computer: () => string;
}
