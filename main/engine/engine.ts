import { mkdirSync } from 'node:fs';
import { EngineError, type EngineErrorCode, type StateRepair } from '../api/index.ts';
import type {
  Bucket,
  BucketType,
  DeviceKey,
  Invoice,
  Metadata,
  Notification,
  Snapshot,
  StorageClass,
  User,
} from '../protocol/index.ts';
import type { VersionEntry } from '../restore/index.ts';
import {
  computerName,
  HomeLock,
  openStateDatabaseRepairing,
  readAccount,
  stateFileOf,
  takeUnshownNotifications,
  type StateDb,
} from '../state/index.ts';
import {
  excludeRulesOf,
  setExcludeRules,
  type SourceExcludeRules,
} from './source-exclude-rules.ts';
import { MetadataCache } from './metadata-cache.ts';
import { approveDeviceKey } from './device-approval.ts';
import { ServiceConnection } from './service-connection.ts';
import { BucketCatalog } from './bucket-catalog.ts';
import {
  BucketVersions,
  type DeletedVersion,
  type KeptVersion,
  type VersionsOrLastSeen,
} from './bucket-versions.ts';
import { versionAsOf, type VersionAsOf } from './version-as-of.ts';
import type { RetentionPolicy } from './retention-policy.ts';
import { VersionRetention, type PruneRequest, type PrunedVersions } from './version-retention.ts';
import { Enrollment, type AccountSummary, type LinkRequest } from './enrollment.ts';
import type { BackupRequest, StoredBackup } from './source-backup.ts';
import type { BackupPlan, PlanRequest } from './backup-plan.ts';
import type { BrowseRequest, BrowsedFolder } from './version-browser.ts';
import type { CompareRequest, ComparedVersions } from './version-comparison.ts';
import type { HistoryRequest, ItemHistory } from './item-history.ts';
import type { VerifiedVersion, VerifyRequest } from './version-verifier.ts';
import type { PlannedRestore, RestoreRequest, RestoredVersion } from './version-restorer.ts';
import type { EngineDeps } from './engine-deps.ts';
import type { EngineParts } from './engine-parts.ts';
import type { EngineRuns } from './engine-runs.ts';

/** How long the notices asked after a backup are waited for before they are given up. */
const NOTICES_WAIT_MS = 10_000;

/**
 * The engine, as its hosts see it: they create one with createEngine(deps) and close it when
 * done. Each request goes to the part that owns it: enrolling and the account (enrollment.ts),
 * buckets (bucket-catalog.ts), versions and snapshots (bucket-versions.ts), backups
 * (source-backup.ts), browsing (version-browser.ts), verifying (version-verifier.ts) and
 * restoring (version-restorer.ts), all over one ServiceConnection.
 */
export class Engine {
  private readonly deps: EngineDeps;
  private readonly db: StateDb;
  /** Held shared while the engine is open: a rebuild of the state database waits for none. */
  private readonly homeLock: HomeLock;
  /** The rebuild of a damaged state database this opening made; null when there was none. */
  private readonly repair: StateRepair | null;
  private readonly metadata: MetadataCache;
  private readonly connection: ServiceConnection;
  private readonly enrollment: Enrollment;
  private readonly buckets: BucketCatalog;
  private readonly versions: BucketVersions;
  private readonly retention: VersionRetention;
  private readonly parts: EngineParts;
  /** Backup, browse, verify and restore, loaded by the first request for one (engine-runs.ts). */
  private runsLoaded: Promise<EngineRuns> | undefined;

  constructor(deps: EngineDeps) {
    this.deps = deps;
    mkdirSync(deps.home, { recursive: true, mode: 0o700 });
    this.homeLock = HomeLock.share(deps.home);
    try {
      const opened = openStateDatabaseRepairing(
        stateFileOf(deps.home),
        (rebuild) => this.homeLock.alone(rebuild),
        this.now(),
      );
      this.db = opened.db;
      this.repair = opened.repair;
      this.metadata = new MetadataCache(
        deps.home,
        this.db,
        deps.metadataCacheBytes,
        deps.metadataLimitBytes,
      );
      this.connection = new ServiceConnection(deps, this.db, () => this.now());
      this.enrollment = new Enrollment(deps, this.db, this.connection, () => this.now());
      this.buckets = new BucketCatalog(deps, this.db, this.connection, this.metadata, () =>
        this.now(),
      );
      this.versions = new BucketVersions(
        deps.home,
        this.db,
        this.connection,
        this.buckets,
        this.metadata,
        () => this.now(),
      );
      this.retention = new VersionRetention(
        deps.home,
        this.db,
        this.connection,
        this.buckets,
        this.versions,
      );
      this.parts = {
        deps,
        db: this.db,
        connection: this.connection,
        metadata: this.metadata,
        buckets: this.buckets,
        versions: this.versions,
        retention: this.retention,
        now: () => this.now(),
        computer: () => computerName(this.db),
      };
    } catch (error) {
      this.homeLock.release();
      throw error;
    }
  }

  /** Where the embedded service keeps the backups, for a device enrolled with it; else null. */
  localDataDir(): string | null {
    const account = readAccount(this.db);
    return account?.mode === 'local' ? account.local_data_dir : null;
  }

  /**
   * The rebuild of a damaged state database that opening this engine made, for the host to tell
   * the user what was lost with it; null when there was none.
   */
  stateRepair(): StateRepair | null {
    return this.repair;
  }

  private now(): number {
    return (this.deps.clock ?? Date.now)();
  }

  private runs(): Promise<EngineRuns> {
    this.runsLoaded ??= import('./engine-runs.ts').then(({ engineRuns }) => engineRuns(this.parts));
    return this.runsLoaded;
  }

  async login(input: {
    server: string;
    code: string;
    deviceName?: string;
  }): Promise<AccountSummary> {
    return this.enrollment.login(input);
  }

  /** Backs up to this computer: starts the embedded service and enrolls this device with it. */
  async loginLocal(input: { dataDir?: string; deviceName?: string }): Promise<AccountSummary> {
    return this.enrollment.loginLocal(input);
  }

  /** Links this device by regwait (§8.3); see Enrollment.link. */
  async link(input: LinkRequest): Promise<AccountSummary> {
    return this.enrollment.link(input);
  }

  /** The account as the service tells it, or as enrolled while it cannot; see Enrollment. */
  async whoami(): Promise<
    AccountSummary & { storageHost: string | null; offlineBecause: EngineErrorCode | null }
  > {
    return this.enrollment.whoami();
  }

  /** Forgets the account locally and deletes this device's key. */
  async logout(): Promise<void> {
    return this.enrollment.logout();
  }

  // Devices

  async listDevices(): Promise<Array<DeviceKey & { current: boolean }>> {
    const { client, account } = await this.connection.connect();
    return (await client.listDeviceKeys()).map((key) => ({
      ...key,
      current: key.id === account.key_id,
    }));
  }

  async approveDevice(input: {
    pem: string;
    name?: string;
  }): Promise<{ id: string; fingerprint: string }> {
    const { client } = await this.connection.connect();
    return approveDeviceKey(client, input);
  }

  async revokeDevice(id: string): Promise<void> {
    const { client, account } = await this.connection.connect();
    await client.deleteDeviceKey(id, { ownKey: id === account.key_id });
  }

  async newEnrollmentCode(): Promise<{ code: string; expiresAt: number }> {
    const { client } = await this.connection.connect();
    const issued = await client.createEnrollmentCode();
    return { code: issued.code, expiresAt: issued.expires_at };
  }

  // Buckets

  async listBuckets(): Promise<Bucket[]> {
    return this.buckets.list();
  }

  async createBucket(input: {
    name: string;
    type: BucketType;
    storageClass: StorageClass;
  }): Promise<Bucket> {
    return this.buckets.create(input);
  }

  async renameBucket(input: { name: string; newName: string }): Promise<Bucket> {
    return this.buckets.rename(input);
  }

  async deleteBucket(input: { name: string }): Promise<void> {
    return this.buckets.delete(input);
  }

  // Backup and restore

  async backup(input: BackupRequest): Promise<StoredBackup> {
    return (await this.runs()).backups.backup(input);
  }

  /** What a backup of `dir` would include and what the rules would skip. No network. */
  async planBackup(input: PlanRequest): Promise<BackupPlan> {
    return (await this.runs()).backups.plan(input);
  }

  /**
   * The exclude rules of the folder `dir`, in the order they apply: Canopy's defaults, those
   * kept for the folder, its .canopyignore's. Needs no server.
   */
  async excludeRules(input: { dir: string }): Promise<SourceExcludeRules> {
    return excludeRulesOf(this.db, input.dir);
  }

  /** Keeps `rules` for the folder `dir` in place of those kept before; [] keeps none. */
  async setExcludeRules(input: {
    dir: string;
    rules: readonly string[];
  }): Promise<SourceExcludeRules> {
    return setExcludeRules(this.db, input.dir, input.rules);
  }

  async listVersions(input: { bucket: string }): Promise<Metadata[]> {
    return this.versions.list(input);
  }

  /** The bucket's versions; while the service cannot be reached, the list as last seen. */
  async versionsOrLastSeen(input: { bucket: string }): Promise<VersionsOrLastSeen> {
    return this.versions.orLastSeen(input);
  }

  /**
   * The bucket's version as it was at `atMs` (`--at`): the newest stored whole and made then or
   * before; from the list as last seen while the service cannot be reached.
   */
  async versionAsOf(input: { bucket: string; atMs: number }): Promise<VersionAsOf> {
    return versionAsOf(this.versions, input);
  }

  async listSnapshots(input: { bucket: string }): Promise<Snapshot[]> {
    return this.versions.listSnapshots(input);
  }

  /** Deletes the versions a retention policy does not keep (VersionRetention.prune). */
  async pruneVersions(input: PruneRequest): Promise<PrunedVersions> {
    return this.retention.prune(input);
  }

  /** Sets the retention policy every backup to the bucket from here applies; null clears it. */
  async setRetentionPolicy(input: {
    bucket: string;
    policy: RetentionPolicy | null;
  }): Promise<RetentionPolicy | null> {
    return this.retention.setPolicy(input);
  }

  /** The retention policy set for the bucket here; null when none is. */
  async retentionPolicy(input: { bucket: string }): Promise<RetentionPolicy | null> {
    return this.retention.policyOf(input);
  }

  /** Pins a version (the active one by default) with a snapshot (BucketVersions). */
  async snapshotVersion(input: { bucket: string; version?: string }): Promise<KeptVersion> {
    return this.versions.snapshotVersion(input);
  }

  /** Deletes a snapshot; its version stays unless the service prunes it (BucketVersions). */
  async deleteSnapshot(input: {
    bucket: string;
    snapshot: string;
  }): Promise<{ snapshot: Snapshot; versionPruned: boolean }> {
    return this.versions.deleteSnapshot(input);
  }

  /** Deletes a version, and the snapshot that pins it (BucketVersions). */
  async deleteVersion(input: { bucket: string; version: string }): Promise<DeletedVersion> {
    return this.versions.deleteVersion(input);
  }

  async ls(input: BrowseRequest): Promise<VersionEntry[]> {
    return (await (await this.runs()).browser.browse(input)).entries;
  }

  /** A folder of a version, from the local metadata cache where it can (VersionBrowser). */
  async browse(input: BrowseRequest): Promise<BrowsedFolder> {
    return (await this.runs()).browser.browse(input);
  }

  /** What changed from one version of a bucket to another (VersionComparison). */
  async compare(input: CompareRequest): Promise<ComparedVersions> {
    return (await this.runs()).comparison.compare(input);
  }

  /** The versions in which one item differs from the version before (ItemHistoryReader). */
  async history(input: HistoryRequest): Promise<ItemHistory> {
    return (await this.runs()).history.history(input);
  }

  async verify(input: VerifyRequest): Promise<VerifiedVersion> {
    return (await this.runs()).verifier.verify(input);
  }

  async restore(input: RestoreRequest): Promise<RestoredVersion> {
    return (await this.runs()).restorer.restore(input);
  }

  /** What `restore` would do with `input`; nothing is fetched but the version's list of files. */
  async planRestore(input: RestoreRequest): Promise<PlannedRestore> {
    return (await this.runs()).restorer.plan(input);
  }

  // Account

  async getAccount(): Promise<User> {
    const { client } = await this.connection.connect();
    return client.getUser();
  }

  async updateAccount(input: {
    displayName?: string | null;
    locale?: string | null;
  }): Promise<User> {
    const { client } = await this.connection.connect();
    await client.updateUser({
      ...(input.displayName === undefined ? {} : { display_name: input.displayName }),
      ...(input.locale === undefined ? {} : { locale: input.locale }),
    });
    return client.getUser();
  }

  async listInvoices(): Promise<Invoice[]> {
    const { client } = await this.connection.connect();
    return client.listInvoices();
  }

  async listNotifications(): Promise<Notification[]> {
    const { client } = await this.connection.connect();
    return client.listNotifications();
  }

  /**
   * The server's warnings and errors for this account that no command showed before, oldest
   * first; from now on they count as shown (shown-notifications.ts).
   */
  async unshownNotifications(): Promise<Notification[]> {
    const { client } = await this.connection.connect();
    // Asked after a backup stored its version: a server slow to answer, or a link gone dead
    // just then, must not hold the backup's command for minutes of retries and read timeouts.
    const waited = AbortSignal.timeout(NOTICES_WAIT_MS);
    const listed = await client
      .triedOnce()
      .stoppedBy(waited)
      .listNotifications()
      .catch((error: unknown) => {
        if (!waited.aborted) throw error;
        throw new EngineError(
          'timeout',
          `the server gave no answer within ${NOTICES_WAIT_MS / 1000} s`,
          { retryable: true, cause: error },
        );
      });
    return takeUnshownNotifications(this.db, listed, this.now());
  }

  async dismissNotification(id: string): Promise<void> {
    const { client } = await this.connection.connect();
    try {
      await client.dismissNotification(id);
    } catch (error) {
      if (error instanceof EngineError && error.code === 'conflict') {
        throw new EngineError('conflict', 'this notification cannot be dismissed', {
          cause: error,
        });
      }
      throw error;
    }
  }

  async close(): Promise<void> {
    this.db.close();
    this.homeLock.release();
    await this.connection.close();
  }
}
