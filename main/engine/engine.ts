import { mkdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  EngineError,
  isDiskGone,
  isEngineError,
  type EngineErrorCode,
  type StateRepair,
} from '../api/index.ts';
import type {
  Bucket,
  BucketType,
  DeviceKey,
  Invoice,
  Notification,
  StorageClass,
  User,
} from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import {
  backupSource,
  pullPhase,
  type BackupProgress,
  type BackupResult,
  type RestoreProgress,
  type VerifyProgress,
} from '../uploader/index.ts';
import {
  filesNeedingBlocks,
  listVersionPath,
  originalPlace,
  removeLeftTemporaries,
  restoreVersion,
  unavailableBlockReason,
  verifyVersion,
  type RestoreResult,
  type SampleCheck,
  type UnavailableBlockReport,
  type UnrestorableFile,
  type VerifyResult,
  type VersionEntry,
} from '../restore/index.ts';
import {
  openBrowsableTree,
  readTreeIndexOfFile,
  isDamagedMetadata,
  readTreeLeavesOfFile,
  shardTargetFor,
  type TreeIndex,
  type BrowsableTree,
  type TreeIndexOfFile,
  type TreeLeaves,
} from '../uploader/index.ts';
import {
  DEFAULT_KEPT_FREE,
  OUT_OF_SPACE_MSG,
  type Metadata,
  type Snapshot,
} from '../protocol/index.ts';
import {
  checkSourceFolder,
  excludingFolders,
  loadExcludeRules,
  walkSource,
  type SkippedItem,
} from '../scanner/index.ts';
import {
  BackupLock,
  RestoreMark,
  lastKnownActiveVersion,
  rememberActiveVersion,
  recordShardLimit,
  recordUploadSpeed,
  sourceExcludesOf,
  sourceFileIndex,
  blocksToResend,
  forgetBlocksToResend,
  noteBlocksToResend,
  metadataToStoreAgain,
  forgetMetadataToStoreAgain,
  noteMetadataToStoreAgain,
  uploadQueue,
  shardLimitOf,
  uploadSpeedOf,
  HomeLock,
  openStateDatabaseRepairing,
  readAccount,
  stateFileOf,
  type AccountRecord,
  type StateDb,
} from '../state/index.ts';
import { diskGoneError } from './disk-gone-error.ts';
import {
  excludeRulesOf,
  setExcludeRules,
  type SourceExcludeRules,
} from './source-exclude-rules.ts';
import { refuseEmptiedSource } from './emptied-source.ts';
import { MetadataCache, type PullProgress, type TreeReader } from './metadata-cache.ts';
import { ServiceConnection } from './service-connection.ts';
import { BucketCatalog } from './bucket-catalog.ts';
import {
  BucketVersions,
  refuseVersionAndSnapshot,
  type DeletedVersion,
  type VersionsOrLastSeen,
} from './bucket-versions.ts';
import { Enrollment, type AccountSummary, type LinkRequest } from './enrollment.ts';
import { NO_RETRY, UNREACHABLE } from './unreachable.ts';
import type { EngineDeps } from './engine-deps.ts';

/** Runs `use` on `tree`, then closes the metadata CAR file its nodes are read from. */
async function usingTree<Tree extends { close(): void }, T>(
  tree: Tree,
  use: (tree: Tree) => Promise<T>,
): Promise<T> {
  try {
    return await use(tree);
  } finally {
    tree.close();
  }
}

/** Whether `dir` is a folder now; a disk pulled out while mounted (ENOTCONN) holds none. */
function isFolderHere(dir: string): boolean {
  try {
    return statSync(dir, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch (error) {
    if (isDiskGone(error)) return false;
    throw error;
  }
}

/** The embedded service's room kept free on the backup disk, as the user is told it. */
const KEPT_FREE_TEXT = `${DEFAULT_KEPT_FREE.fraction * 100} % of it, at most ${DEFAULT_KEPT_FREE.maxBytes / (1 << 30)} GiB,`;

/**
 * What a backup's check of random blocks fetches at most (beyond its first block): over a slow
 * link, more would keep the backup from ending for minutes (4 MiB take 30 s at 1 Mbit/s).
 */
const SAMPLE_CHECK_BYTES = 4 * 1024 * 1024;

/**
 * The engine, as its hosts see it: they create one with createEngine(deps) and close it when
 * done. Each request goes to the part that owns it: enrolling and the account (enrollment.ts),
 * buckets (bucket-catalog.ts), versions and snapshots (bucket-versions.ts), all over one
 * ServiceConnection; backup, browse, verify and restore are run here.
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
      this.metadata = new MetadataCache(deps.home, this.db, deps.metadataCacheBytes);
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
    return client.addDeviceKey(input);
  }

  async revokeDevice(id: string): Promise<void> {
    const { client } = await this.connection.connect();
    await client.deleteDeviceKey(id);
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

  async backup(input: {
    dir: string;
    bucket: string;
    replaceSource?: boolean;
    /** Back up the folder even when it is empty and its last backup was not (emptied-source.ts). */
    allowEmpty?: boolean;
    onProgress?: (progress: BackupProgress) => void;
    /**
     * Once the backup is stored, this many random blocks of the bucket's active version (of at
     * most SAMPLE_CHECK_BYTES together) are fetched again and checked against their CIDs
     * (`sampleCheck`); none when not given.
     */
    checkBlocks?: number;
    /** Stops the backup (`stopped`); the next one finishes what it stored. */
    signal?: AbortSignal;
  }): Promise<BackupResult & { readonly sampleCheck?: SampleCheck }> {
    const sourceDir = path.resolve(input.dir);
    // A mistyped folder is told at once, before any network.
    checkSourceFolder(sourceDir);
    const connected = await this.connection.connect();
    const { account } = connected;
    const client = input.signal ? connected.client.stoppedBy(input.signal) : connected.client;
    if (account.mode === 'local' && this.connection.localService?.readOnly) {
      // Told before packing: the push at the end would only be refused.
      throw new EngineError(
        'local_server',
        `the backups in ${account.local_data_dir ?? ''} are on a disk mounted read-only: they can be browsed and restored, but a backup needs the disk mounted writable (after checking it for errors)`,
      );
    }
    const bucket = await this.buckets.byName(input.bucket);
    const lock = BackupLock.tryAcquire(this.deps.home, bucket.id);
    if (!lock) {
      throw new EngineError(
        'busy',
        `another backup to bucket "${bucket.name}" is running; wait for it to finish`,
        { retryable: true },
      );
    }
    try {
      const result = await this.backupLocked(client, account, bucket, sourceDir, input);
      if (input.checkBlocks === undefined || input.checkBlocks <= 0) return result;
      const sampleCheck = await this.checkSample(
        client,
        bucket.id,
        result.versionId,
        input.checkBlocks,
      );
      return { ...result, sampleCheck };
    } catch (error) {
      if (input.signal?.aborted === true)
        throw new EngineError(
          'stopped',
          'the backup was stopped: run it again to finish it (what it stored stays, and only what is missing is sent)',
          { cause: error },
        );
      throw this.toldAsLocalDisk(diskGoneError(error, sourceDir, 'backup'), 'backup');
    } finally {
      lock.release();
    }
  }

  /**
   * Fetches `blocks` random blocks of version `versionId` again and checks them: a block the
   * host sent damaged twice, or lost, is noted for the next backup to send again. A failure to
   * check (the link went, the backup was stopped) is told, not thrown: the backup is stored.
   */
  private async checkSample(
    client: ServiceClient,
    bucketId: string,
    versionId: string,
    blocks: number,
  ): Promise<SampleCheck> {
    try {
      const who = await client.whoAmI();
      const tree = await this.metadata.versionTree(client, versionId, readTreeLeavesOfFile);
      const { checked, verifiedAt, unavailable, wholeOnRetry } = await verifyVersion({
        client,
        storageHost: who.storage_host,
        tree,
        sample: blocks,
        sampleBytes: SAMPLE_CHECK_BYTES,
        now: () => this.now(),
      });
      this.noteUnavailable(bucketId, unavailable);
      return { checked, verifiedAt, unavailable, wholeOnRetry };
    } catch (error) {
      return { failed: error instanceof Error ? error.message : String(error) };
    }
  }

  /**
   * `error` told as what happened to the embedded service's disk, where that is why a request
   * failed: pulled out during a backup or restore, the service answers 500 (or no longer
   * answers) for every write and read; full, it answers 500 "out of storage space", which for a
   * server is its operator's to fix, and here is the user's own disk. Other errors pass as
   * they are.
   */
  private toldAsLocalDisk(error: unknown, what: 'backup' | 'restore'): unknown {
    const account = readAccount(this.db);
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
    if (this.connection.localService?.holdsData?.() !== false) return error;
    return new EngineError(
      'local_data_missing',
      `${disk} went away during the ${what}: connect it and run the ${what} again${kept}`,
      { cause: error },
    );
  }

  private async backupLocked(
    client: ServiceClient,
    account: AccountRecord,
    bucket: Bucket,
    sourceDir: string,
    input: {
      replaceSource?: boolean;
      allowEmpty?: boolean;
      onProgress?: (progress: BackupProgress) => void;
      signal?: AbortSignal;
    },
  ): Promise<BackupResult> {
    const fileIndex = sourceFileIndex(this.db, bucket.id, sourceDir);
    if (input.allowEmpty !== true) refuseEmptiedSource(sourceDir, fileIndex.entryCount);
    const resendLeaves = blocksToResend(this.db, bucket.id);
    const storeAgainVersion = metadataToStoreAgain(this.db, bucket.id);
    /** Trees read with their nodes for this backup: their files are closed when it ends. */
    const opened: TreeIndexOfFile[] = [];
    const loadTree = async (versionId: string, withNodes: boolean): Promise<TreeLeaves> => {
      // The version built on, pulled when this computer keeps no copy of it (the first backup
      // here into a bucket another computer fills): its own phase of the progress.
      const { onProgress } = input;
      const onPull = onProgress ? pullPhase(onProgress, () => this.now()) : undefined;
      if (!withNodes)
        return this.metadata.versionTree(client, versionId, readTreeLeavesOfFile, onPull);
      const tree = await this.metadata.versionTree(client, versionId, readTreeIndexOfFile, onPull);
      opened.push(tree);
      return tree;
    };
    let result: BackupResult;
    try {
      result = await backupSource({
        client,
        bucketId: bucket.id,
        sourceDir,
        sourceLabel: `${os.hostname()}:${sourceDir}`,
        ownFolders: this.ownFolders(account),
        deviceFingerprint: account.fingerprint,
        stagingRoot: this.metadata.stagingRoot,
        now: () => this.now(),
        queue: uploadQueue(this.db),
        fileIndex,
        ...(resendLeaves.size > 0 ? { resendLeaves } : {}),
        ...(storeAgainVersion === undefined ? {} : { storeAgainVersion }),
        excludes: sourceExcludesOf(this.db, sourceDir),
        ...(this.deps.afterFileRead ? { afterFileRead: this.deps.afterFileRead } : {}),
        ...(this.deps.metadataLimitBytes === undefined
          ? {}
          : { metadataLimitBytes: this.deps.metadataLimitBytes }),
        // A minute's upload, and no more than the host took after refusing a larger one.
        shardTargetBytes: Math.min(
          this.deps.shardTargetBytes ?? shardTargetFor(uploadSpeedOf(this.db, bucket.id)),
          shardLimitOf(this.db, bucket.id, this.now()) ?? Number.POSITIVE_INFINITY,
        ),
        onShardsTimed: (sample) => recordUploadSpeed(this.db, bucket.id, sample, this.now()),
        onShardLimit: (maxBytes) => recordShardLimit(this.db, bucket.id, maxBytes, this.now()),
        ...(this.deps.afterShardConfirmed
          ? { afterShardConfirmed: this.deps.afterShardConfirmed }
          : {}),
        ...(input.replaceSource === undefined ? {} : { replaceSource: input.replaceSource }),
        ...(input.onProgress ? { onProgress: input.onProgress } : {}),
        ...(input.signal ? { signal: input.signal } : {}),
        keepMetadata: async (versionId, carFile) => {
          await this.metadata.keep(versionId, carFile);
        },
        loadTree,
      });
    } finally {
      for (const tree of opened) tree.close();
    }
    rememberActiveVersion(this.db, {
      bucket_id: bucket.id,
      bucket_name: bucket.name,
      version_id: result.versionId,
      seen_at: this.now(),
    });
    // Sent again, or no longer in the source, which then cannot give them back.
    forgetBlocksToResend(this.db, bucket.id, resendLeaves);
    // Stored again, or no longer the active version.
    if (storeAgainVersion !== undefined) forgetMetadataToStoreAgain(this.db, bucket.id);
    // After the new version is known active: the one it replaced may go now.
    await this.metadata.trim();
    return result;
  }

  /** Canopy's own folders, which no backup reads: this home, and the embedded service's data. */
  private ownFolders(account: AccountRecord | null | undefined): string[] {
    const folders = [this.deps.home];
    if (account?.mode === 'local' && account.local_data_dir) folders.push(account.local_data_dir);
    return folders;
  }

  /** What a backup of `dir` would include and what the rules would skip. No network. */
  async planBackup(input: {
    dir: string;
  }): Promise<{ files: number; bytes: number; excluded: string[]; skipped: SkippedItem[] }> {
    const sourceDir = path.resolve(input.dir);
    checkSourceFolder(sourceDir);
    const rules = excludingFolders(
      await loadExcludeRules(sourceDir, sourceExcludesOf(this.db, sourceDir)),
      sourceDir,
      this.ownFolders(readAccount(this.db)),
    );
    const plan = { files: 0, bytes: 0, excluded: [] as string[], skipped: [] as SkippedItem[] };
    const walk = walkSource(sourceDir, {
      rules,
      onSkip: (item) => plan.skipped.push(item),
      onExcluded: (relativePath) => plan.excluded.push(relativePath),
    });
    for await (const entry of walk) {
      if (entry.kind !== 'file') continue;
      plan.files += 1;
      plan.bytes += entry.size;
    }
    return plan;
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

  async listSnapshots(input: { bucket: string }): Promise<Snapshot[]> {
    return this.versions.listSnapshots(input);
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

  async ls(input: {
    bucket: string;
    version?: string;
    snapshot?: string;
    path?: string;
    onProgress?: (progress: RestoreProgress) => void;
  }): Promise<VersionEntry[]> {
    return (await this.browse(input)).entries;
  }

  /**
   * A folder of a version, from the local metadata cache when it holds the version. When the
   * service cannot be reached, the bucket's active version as last seen is shown from the cache
   * (`offlineSince` says when it was seen, `offlineBecause` why the service did not answer); a
   * named version in the cache needs no service.
   */
  async browse(input: {
    bucket: string;
    version?: string;
    snapshot?: string;
    path?: string;
    /**
     * Told the fetch of the version's metadata CAR (the 'pulling' phase, as a restore's), when
     * this computer keeps no copy of it: browsing is instant only once it is kept.
     */
    onProgress?: (progress: RestoreProgress) => void;
  }): Promise<{
    versionId: string;
    offlineSince: number | null;
    offlineBecause: EngineErrorCode | null;
    entries: VersionEntry[];
  }> {
    refuseVersionAndSnapshot(input);
    const online = { offlineSince: null, offlineBecause: null };
    const list = async (versionId: string, tree: BrowsableTree): Promise<VersionEntry[]> => {
      try {
        return await usingTree(tree, (open) => listVersionPath(open, input.path ?? ''));
      } catch (error) {
        // A node that no longer matches its CID: the CAR was damaged on this disk after it was
        // cached (its index spared reading it whole). It goes, so the version is pulled again.
        if (isEngineError(error, 'protocol')) await this.metadata.forget(versionId);
        throw error;
      }
    };
    if (input.version !== undefined) {
      const cached = await this.metadata.cachedTree(input.version, openBrowsableTree);
      if (cached)
        return { versionId: input.version, ...online, entries: await list(input.version, cached) };
    }
    try {
      // One attempt, no backoff: browsing falls back to the cache instead of waiting.
      const { client } = await this.connection.connect({ retry: NO_RETRY });
      const { versionId } = await this.versions.resolve(client, input);
      const { onProgress } = input;
      const onPull = (): PullProgress | undefined =>
        onProgress ? pullPhase(onProgress, () => this.now()) : undefined;
      let entries: VersionEntry[];
      try {
        entries = await list(
          versionId,
          await this.metadata.versionTree(client, versionId, openBrowsableTree, onPull()),
        );
      } catch (error) {
        if (!isEngineError(error, 'protocol')) throw error;
        const pulled = await this.metadata.pulledTree(
          client,
          versionId,
          openBrowsableTree,
          true,
          onPull(),
        );
        entries = await list(versionId, pulled);
      }
      return { versionId, ...online, entries };
    } catch (error) {
      const unreachable = error instanceof EngineError && UNREACHABLE.has(error.code);
      const known = lastKnownActiveVersion(this.db, input.bucket);
      const cached =
        unreachable && input.version === undefined && input.snapshot === undefined && known
          ? await this.metadata.cachedTree(known.version_id, openBrowsableTree)
          : undefined;
      if (!cached || !known || !(error instanceof EngineError)) {
        cached?.close();
        throw error;
      }
      return {
        versionId: known.version_id,
        offlineSince: known.seen_at,
        offlineBecause: error.code,
        entries: await list(known.version_id, cached),
      };
    }
  }

  async verify(input: {
    bucket: string;
    version?: string;
    all: boolean;
    /** Takes the blocks and bytes checked so far, with an ETA. */
    onProgress?: (progress: VerifyProgress) => void;
    /** Stops the verify (`stopped`). */
    signal?: AbortSignal;
  }): Promise<
    VerifyResult & { readonly versionId: string; readonly unrestorable: UnrestorableFile[] }
  > {
    try {
      return await this.verifyStoppable(await this.stoppableClient(input.signal), input);
    } catch (error) {
      if (input.signal?.aborted === true)
        throw new EngineError('stopped', 'the verify was stopped before it checked every block', {
          cause: error,
        });
      throw error;
    }
  }

  /** The service's client, its requests stopped by `signal` when given. */
  private async stoppableClient(signal: AbortSignal | undefined): Promise<ServiceClient> {
    const { client } = await this.connection.connect();
    return signal ? client.stoppedBy(signal) : client;
  }

  private async verifyStoppable(
    client: ServiceClient,
    input: Parameters<Engine['verify']>[0],
  ): Promise<
    VerifyResult & { readonly versionId: string; readonly unrestorable: UnrestorableFile[] }
  > {
    const { versionId, bucketId, active } = await this.versions.resolve(client, input, true);
    // Verification trusts nothing local (not even the metadata cache): pull it fresh. All of
    // the blocks are asked for in the order a restore reads them, which needs the tree's nodes
    // (read from the pulled file, open until the verify ends).
    const { onProgress } = input;
    const onPull = onProgress
      ? pullPhase(
          ({ bytesDone, bytesTotal, etaSeconds }) =>
            onProgress({
              phase: 'pulling',
              blocksDone: 0,
              blocksTotal: 0,
              bytesDone,
              bytesTotal,
              etaSeconds,
            }),
          () => this.now(),
        )
      : undefined;
    const pulled = async <Tree>(read: TreeReader<Tree>): Promise<Tree> => {
      try {
        return await this.metadata.pulledTree(client, versionId, read, false, onPull);
      } catch (error) {
        throw this.damagedMetadata(error, { bucketId, versionId, active });
      }
    };
    const withNodes = input.all ? await pulled(readTreeIndexOfFile) : undefined;
    const tree = withNodes ?? (await pulled(readTreeLeavesOfFile));
    let result: VerifyResult;
    try {
      const who = await client.whoAmI();
      result = await verifyVersion({
        client,
        storageHost: who.storage_host,
        tree,
        sample: input.all ? 'all' : 64,
        now: () => this.now(),
        ...(input.onProgress ? { onProgress: input.onProgress } : {}),
      });
    } finally {
      withNodes?.close();
    }
    this.noteUnavailable(bucketId, result.unavailable);
    if (result.unavailable.length === 0) return { ...result, versionId, unrestorable: [] };
    // Rare, and the leaves alone do not name files: the whole tree is read only now.
    const reasons = new Map(
      result.unavailable.map(({ cid, why }) => [cid, unavailableBlockReason(cid, why)]),
    );
    const unrestorable = await usingTree(
      await this.metadata.versionTree(client, versionId, readTreeIndexOfFile),
      (tree) => Promise.resolve(filesNeedingBlocks(tree, reasons)),
    );
    return { ...result, versionId, unrestorable };
  }

  /**
   * `error` told as a version's metadata damaged on the server, where it is that: of the active
   * version, noted for the bucket's next backup to store a version in its place.
   */
  private damagedMetadata(
    error: unknown,
    version: { readonly bucketId: string; readonly versionId: string; readonly active: boolean },
  ): unknown {
    if (!isDamagedMetadata(error)) return error;
    const { bucketId, versionId, active } = version;
    if (active) noteMetadataToStoreAgain(this.db, bucketId, versionId, this.now());
    return new EngineError(
      'protocol',
      active
        ? `the metadata of version ${versionId} is damaged on the server (${error.cause.message}): the next backup of its folder stores a version in its place`
        : `the metadata of version ${versionId} is damaged on the server (${error.cause.message}): it can no longer be browsed, restored or verified from there`,
      { cause: error },
    );
  }

  /**
   * Notes blocks the host could not give back whole for the bucket's next backup to send again
   * (backupSource's resendLeaves), from whichever of its versions they were asked.
   */
  private noteUnavailable(bucketId: string, unavailable: readonly UnavailableBlockReport[]): void {
    if (unavailable.length === 0) return;
    noteBlocksToResend(
      this.db,
      bucketId,
      unavailable.map((block) => block.cid),
      this.now(),
    );
  }

  async restore(input: {
    bucket: string;
    version?: string;
    snapshot?: string;
    path?: string;
    /** The folder to restore into; by default where the version was backed up from. */
    to?: string;
    overwrite: boolean;
    /** Takes the files and bytes written so far, with an ETA. */
    onProgress?: (progress: RestoreProgress) => void;
    /** Leaves whole chunks of zeros as holes (restoreVersion's `sparse`). */
    sparse?: boolean;
    /** Stops the restore (`stopped`); what it wrote whole stays. */
    signal?: AbortSignal;
  }): Promise<
    RestoreResult & { readonly leftoversRemoved: number; readonly restoredInto: string }
  > {
    // Before any network: the request is wrong whatever the service says.
    refuseVersionAndSnapshot(input);
    try {
      const client = await this.stoppableClient(input.signal);
      const { versionId, bucketId } = await this.versions.resolve(client, input, true);
      const who = await client.whoAmI();
      // A version this computer keeps no copy of (a new computer's restore) pulls its list of
      // files first: megabytes, over a slow link minutes, shown as their own phase.
      const onPull = input.onProgress ? pullPhase(input.onProgress, () => this.now()) : undefined;
      const result = await usingTree(
        await this.metadata.versionTree(client, versionId, readTreeIndexOfFile, onPull),
        (tree) => this.restoreTree(client, who.storage_host, tree, input),
      );
      this.noteUnavailable(bucketId, result.unavailable);
      return result;
    } catch (error) {
      if (input.signal?.aborted === true)
        throw new EngineError(
          'stopped',
          'the restore was stopped: the files it finished are in place, and running it again brings the rest',
          { cause: error },
        );
      throw error;
    }
  }

  private async restoreTree(
    client: ServiceClient,
    storageHost: string,
    tree: TreeIndex,
    input: Parameters<Engine['restore']>[0],
  ): Promise<RestoreResult & { readonly leftoversRemoved: number; readonly restoredInto: string }> {
    const targetDir =
      input.to === undefined
        ? originalPlace(tree.manifest['source_label'], input.path, {
            hostname: os.hostname(),
            isFolder: isFolderHere,
          })
        : path.resolve(input.to);
    const leftoversRemoved = this.removeStoppedRestoresLeftovers();
    const mark = RestoreMark.start(this.deps.home, targetDir);
    let finished = false;
    try {
      const result = await restoreVersion({
        client,
        storageHost,
        tree,
        targetDir,
        overwrite: input.overwrite,
        temporaryToken: mark.token,
        ...(input.path === undefined ? {} : { subPath: input.path }),
        ...(this.deps.afterFileRestored ? { afterFileWritten: this.deps.afterFileRestored } : {}),
        ...(input.onProgress ? { onProgress: input.onProgress } : {}),
        ...(input.sparse === true ? { sparse: true } : {}),
        ...(input.signal ? { signal: input.signal } : {}),
      });
      finished = true;
      return { ...result, leftoversRemoved, restoredInto: targetDir };
    } catch (error) {
      throw this.toldAsLocalDisk(diskGoneError(error, targetDir, 'restore'), 'restore');
    } finally {
      if (finished) mark.end();
      else this.endUnlessLeft(mark, targetDir);
    }
  }

  /**
   * Ends the mark of a restore that failed once none of its temporaries are left. It removed
   * those it could as it stopped, but a target whose disk was pulled out keeps the ones written
   * before, and the mark stays so that the next restore removes them once it is back.
   */
  private endUnlessLeft(mark: RestoreMark, targetDir: string): void {
    let someLeft = true;
    try {
      someLeft = removeLeftTemporaries(targetDir, mark.token).someLeft;
    } catch {
      // The restore's own failure is the one to report; the next restore looks again, and
      // says what stops it there.
    } finally {
      if (someLeft) mark.release();
      else mark.end();
    }
  }

  /**
   * Removes the files that restores killed part-way left under their temporary names, wherever
   * they were restoring to, and returns how many. A stopped restore's mark stays while some may
   * be left (its target's disk is not mounted, or a folder cannot be read), so a later restore
   * looks again; none of that stops this one.
   */
  private removeStoppedRestoresLeftovers(): number {
    let removed = 0;
    for (const { mark, target } of RestoreMark.stopped(this.deps.home)) {
      try {
        const left = removeLeftTemporaries(target, mark.token);
        removed += left.removed;
        if (!left.someLeft) mark.end();
      } finally {
        mark.release();
      }
    }
    return removed;
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
