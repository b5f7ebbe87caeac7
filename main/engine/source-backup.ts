import { EngineError } from '../api/index.ts';
import type { Bucket } from '../protocol/index.ts';
import { timesInTree, type SampleCheck } from '../restore/index.ts';
import { checkSourceFolder, knownPathOf } from '../scanner/index.ts';
import type { ServiceClient, ServiceWait } from '../service/index.ts';
import { pacedClient, transferLimitsOf } from './transfer-limits.ts';
import {
  BackupLock,
  blocksToResend,
  forgetBlocksToResend,
  forgetMetadataToStoreAgain,
  metadataToStoreAgain,
  readAccount,
  recordShardLimit,
  recordUploadSpeed,
  rememberActiveVersion,
  rememberVersionTotals,
  indexedSourceDirs,
  shardLimitOf,
  RestoredFiles,
  sourceDirIndexing,
  sourceFileIndex,
  uploadQueue,
  expectedUploadSpeedOf,
  type AccountRecord,
} from '../state/index.ts';
import {
  backupSource,
  pullPhase,
  readTreeIndexOfFile,
  readTreeLeavesOfFile,
  shardTargetFor,
  type BackupProgress,
  type BackupResult,
  type TreeIndexOfFile,
  type TreeLeaves,
} from '../uploader/index.ts';
import { diskGoneError } from './disk-gone-error.ts';
import { toldIfFolderGone } from './folder-gone-error.ts';
import { tidyStoppedRestores } from './stopped-restores.ts';
import { restoreBusyError } from './restore-backup-exclusion.ts';
import { keptUnlessDiskFull } from './kept-unless-disk-full.ts';
import { formerExcludesOf } from './former-excludes.ts';
import { planBackup, type BackupPlan, type PlanRequest } from './backup-plan.ts';
import { refuseEmptiedSource } from './emptied-source.ts';
import { toldAsLocalDisk } from './local-disk-error.ts';
import { keepExcludesFor, keptExcludesOf } from './source-exclude-rules.ts';
import type { EngineParts } from './engine-parts.ts';
import { NO_RETRY, UNREACHABLE } from './unreachable.ts';
import type { VersionVerifier } from './version-verifier.ts';
import { absolutePath } from './absolute-path.ts';
import { backupStoppedPartWay } from './backup-stopped-part-way.ts';

// Backing up a folder into a bucket: one backup per bucket at a time (BackupLock), each
// building on the bucket's active version and the folder's file index; its dry run is
// backup-plan.ts.

/**
 * BackupInput's expectedUploadBytesPerSecond: the slower of the measured upload speed
 * (expectedUploadSpeedOf) and the user's limit, of those known.
 */
function expectedSpeed(
  measured: number | undefined,
  limit: number | undefined,
): { expectedUploadBytesPerSecond?: number } {
  const known = [measured, limit].filter((speed): speed is number => speed !== undefined);
  return known.length === 0 ? {} : { expectedUploadBytesPerSecond: Math.min(...known) };
}

export interface BackupRequest {
  readonly dir: string;
  readonly bucket: string;
  readonly replaceSource?: boolean;
  /** Back up the folder even when it is empty and its last backup was not (emptied-source.ts). */
  readonly allowEmpty?: boolean;
  readonly onProgress?: (progress: BackupProgress) => void;
  /**
   * Once the backup is stored, this many random blocks of the bucket's active version are
   * fetched again and checked against their CIDs (`sampleCheck`); none when not given.
   */
  readonly checkBlocks?: number;
  /** Stops the backup (`stopped`); the next one finishes what it stored. */
  readonly signal?: AbortSignal;
  /** The most bytes a second it sends (`--limit-upload`); as fast as it can when not given. */
  readonly uploadBytesPerSecond?: number;
  /**
   * Told once as the backup starts to wait out an outage of the service it reached (restarting,
   * or the link down), and once it reached the service again (service-outage.ts).
   */
  readonly onServiceWait?: (wait: ServiceWait) => void;
}

/**
 * What the retention policy set for the bucket on this device did once the backup was stored
 * (version-retention.ts): the policy, as its options, and the versions it removed; or why it
 * was not applied, or failed. The backup is stored either way.
 */
export type BackupRetention =
  | { readonly policy: string; readonly removed: readonly string[] }
  | { readonly notApplied: string }
  /** Failed part-way: `removed` are those it removed before. */
  | { readonly failed: string; readonly removed: readonly string[] };

export type StoredBackup = BackupResult & {
  readonly sampleCheck?: SampleCheck;
  /** Absent when no retention policy is set for the bucket here. */
  readonly retention?: BackupRetention;
};

export class SourceBackup {
  constructor(
    private readonly parts: EngineParts,
    private readonly verifier: VersionVerifier,
  ) {}

  async backup(input: BackupRequest): Promise<StoredBackup> {
    const givenDir = absolutePath(input.dir);
    // A mistyped folder is told at once, before any network.
    checkSourceFolder(givenDir);
    const limits = transferLimitsOf(input);
    const connected = await this.parts.connection.connect({
      signal: input.signal,
      ridingOutOutages: { onWait: input.onServiceWait },
    });
    const { account } = connected;
    const client = pacedClient(connected.client, limits);
    if (account.mode === 'local' && this.parts.connection.localService?.readOnly) {
      // Told before packing: the push at the end would only be refused.
      throw new EngineError(
        'local_server',
        `the backups in ${account.local_data_dir ?? ''} are on a disk mounted read-only: they can be browsed and restored, but a backup needs the disk mounted writable (after checking it for errors)`,
      );
    }
    const bucket = await this.parts.buckets.byName(input.bucket);
    // The same folder by another path than before (a link, or `.`) is backed up as before: by
    // the same label, with the same file index.
    const sourceDir = knownPathOf(givenDir, indexedSourceDirs(this.parts.db, bucket.id));
    const { home } = this.parts.deps;
    const lock = BackupLock.tryAcquire(home, bucket.id);
    if (!lock) {
      throw (
        restoreBusyError(home, sourceDir) ??
        new EngineError(
          'busy',
          `another backup to bucket "${bucket.name}" is running; wait for it to finish`,
          { retryable: true },
        )
      );
    }
    try {
      // One into a folder this bucket never backed up before holds no lock of it.
      const restoring = restoreBusyError(home, sourceDir);
      if (restoring) throw restoring;
      // A restore killed part-way into this folder left the read-only folders it opened with
      // write permission added: given back first, the version records their own modes.
      this.tidyStoppedRestores();
      const result = await this.backupLocked(client, account, bucket, sourceDir, input);
      // The backup is stored: what follows does not wait out an outage of the service, and says
      // it could not be done.
      const afterwards = client.notRidingOutOutages();
      const sampleCheck =
        input.checkBlocks === undefined || input.checkBlocks <= 0
          ? undefined
          : await this.verifier.checkSample(
              afterwards,
              bucket.id,
              result.versionId,
              input.checkBlocks,
              { index: sourceFileIndex(this.parts.db, bucket.id, sourceDir), files: result.files },
            );
      const retention = await this.applyRetention(afterwards, bucket, result);
      return {
        ...result,
        ...(sampleCheck ? { sampleCheck } : {}),
        ...(retention ? { retention } : {}),
      };
    } catch (error) {
      if (input.signal?.aborted === true)
        throw new EngineError(
          'stopped',
          'the backup was stopped: run it again to finish it (what it stored stays, and only what is missing is sent)',
          { cause: error },
        );
      throw backupStoppedPartWay(
        toldAsLocalDisk(
          // A disk that stopped answering is told as such first: its folder may be gone with it.
          toldIfFolderGone(diskGoneError(error, sourceDir, 'backup'), sourceDir, 'backup'),
          'backup',
          this.parts.db,
          this.parts.connection,
        ),
        this.parts.db,
        bucket.id,
      );
    } finally {
      lock.release();
    }
  }

  /**
   * Applies the retention policy set for the bucket here, once `stored` is: not when the version
   * lacks items it could not read, since the versions before it may be the only ones holding
   * them. Its failure does not undo the backup, and is told beside it.
   */
  private async applyRetention(
    client: ServiceClient,
    bucket: Bucket,
    stored: BackupResult,
  ): Promise<BackupRetention | undefined> {
    const removed: string[] = [];
    try {
      const unreadable = stored.skipped.filter((item) => item.kind === 'unreadable').length;
      if (unreadable > 0) {
        // Whether a policy is set at all: one is told only where there is one.
        if (!this.parts.retention.policySet(bucket)) return undefined;
        return {
          notApplied: `the version lacks ${unreadable === 1 ? 'an item' : 'items'} it could not read, which the versions before it may hold`,
        };
      }
      const applied = await this.parts.retention.applySetPolicy(client, bucket, (version) =>
        removed.push(version.id),
      );
      if (!applied) return undefined;
      return { policy: applied.policy, removed };
    } catch (error) {
      return { failed: error instanceof Error ? error.message : String(error), removed };
    }
  }

  /** tidyStoppedRestores, for a backup: what stops it there is for a restore to tell. */
  private tidyStoppedRestores(): void {
    try {
      tidyStoppedRestores(this.parts.deps.home);
    } catch {
      // Left for the next restore, which must tidy them before it writes, and says what stops
      // it (a disk failing to list a folder, say): a restore elsewhere does not fail a backup.
    }
  }

  /** What a backup of `dir` would include and what the rules would skip (backup-plan.ts). */
  async plan(input: PlanRequest): Promise<BackupPlan> {
    return planBackup(this.parts, input, this.ownFolders(readAccount(this.parts.db)));
  }

  private async backupLocked(
    client: ServiceClient,
    account: AccountRecord,
    bucket: Bucket,
    sourceDir: string,
    input: BackupRequest,
  ): Promise<BackupResult> {
    const fileIndex = sourceFileIndex(this.parts.db, bucket.id, sourceDir);
    const restoredFiles = RestoredFiles.of(this.parts.db, bucket.id, sourceDir);
    /** The restored files this backup may find: those noted later stay for the next one. */
    const restoredThrough = restoredFiles.newest();
    if (input.allowEmpty !== true) refuseEmptiedSource(sourceDir, fileIndex.entryCount);
    const resendLeaves = blocksToResend(this.parts.db, bucket.id);
    const storeAgainVersion = metadataToStoreAgain(this.parts.db, bucket.id);
    const measuredSpeed = expectedUploadSpeedOf(this.parts.db, bucket.id);
    /** Trees read with their nodes for this backup: their files are closed when it ends. */
    const opened: TreeIndexOfFile[] = [];
    const loadTree = async (versionId: string, withNodes: boolean): Promise<TreeLeaves> => {
      // The version built on, pulled when this computer keeps no copy of it (the first backup
      // here into a bucket another computer fills): its own phase of the progress.
      const { onProgress } = input;
      const onPull = onProgress ? pullPhase(onProgress, () => this.parts.now()) : undefined;
      if (!withNodes)
        return this.parts.metadata.versionTree(client, versionId, readTreeLeavesOfFile, onPull);
      const tree = await this.parts.metadata.versionTree(
        client,
        versionId,
        readTreeIndexOfFile,
        onPull,
      );
      opened.push(tree);
      return tree;
    };
    let result: BackupResult;
    try {
      result = await backupSource({
        client,
        bucketId: bucket.id,
        sourceDir,
        sourceLabel: `${this.parts.computer()}:${sourceDir}`,
        ownFolders: this.ownFolders(account),
        deviceFingerprint: account.fingerprint,
        stagingRoot: this.parts.metadata.stagingRoot,
        now: () => this.parts.now(),
        queue: uploadQueue(this.parts.db),
        fileIndex,
        ...(restoredThrough > 0 ? { restoredFiles } : {}),
        formerIndexOf: (versionId) => {
          const dir = sourceDirIndexing(this.parts.db, bucket.id, versionId);
          return dir === undefined || dir === sourceDir
            ? undefined
            : sourceFileIndex(this.parts.db, bucket.id, dir);
        },
        formerExcludesOf: (versionId) =>
          formerExcludesOf(this.parts.db, bucket.id, sourceDir, versionId),
        keepExcludes: (rules) => keepExcludesFor(this.parts.db, sourceDir, rules),
        ...(resendLeaves.size > 0 ? { resendLeaves } : {}),
        ...(storeAgainVersion === undefined ? {} : { storeAgainVersion }),
        excludes: keptExcludesOf(this.parts.db, sourceDir),
        ...(this.parts.deps.afterFileRead ? { afterFileRead: this.parts.deps.afterFileRead } : {}),
        ...(this.parts.deps.metadataLimitBytes === undefined
          ? {}
          : { metadataLimitBytes: this.parts.deps.metadataLimitBytes }),
        ...expectedSpeed(measuredSpeed, input.uploadBytesPerSecond),
        // A minute's upload (at the limit, when there is one), and no more than the host took
        // after refusing a larger one.
        shardTargetBytes: Math.min(
          this.parts.deps.shardTargetBytes ?? shardTargetFor(measuredSpeed),
          input.uploadBytesPerSecond === undefined
            ? Number.POSITIVE_INFINITY
            : shardTargetFor(input.uploadBytesPerSecond),
          shardLimitOf(this.parts.db, bucket.id, this.parts.now()) ?? Number.POSITIVE_INFINITY,
        ),
        // A limited upload's speed is the limit's, not the link's, which the next backup
        // without one would take its shards' size from.
        ...(input.uploadBytesPerSecond === undefined
          ? {
              onShardsTimed: (sample: { readonly bytes: number; readonly ms: number }) =>
                recordUploadSpeed(this.parts.db, bucket.id, sample, this.parts.now()),
            }
          : {}),
        onShardLimit: (maxBytes) =>
          recordShardLimit(this.parts.db, bucket.id, maxBytes, this.parts.now()),
        ...(this.parts.deps.afterShardConfirmed
          ? { afterShardConfirmed: this.parts.deps.afterShardConfirmed }
          : {}),
        ...(input.replaceSource === undefined ? {} : { replaceSource: input.replaceSource }),
        ...(input.onProgress ? { onProgress: input.onProgress } : {}),
        ...(input.signal ? { signal: input.signal } : {}),
        keepMetadata: async (versionId, carFile) => {
          await this.parts.metadata.keep(versionId, carFile);
        },
        loadTree,
        timesInTree,
      });
    } finally {
      for (const tree of opened) tree.close();
    }
    rememberActiveVersion(this.parts.db, {
      bucket_id: bucket.id,
      bucket_name: bucket.name,
      version_id: result.versionId,
      seen_at: this.parts.now(),
    });
    // What a version made now holds, as its manifest states it, for `canopy versions`.
    if (result.unchanged !== true)
      keptUnlessDiskFull(() =>
        rememberVersionTotals(this.parts.db, result.versionId, {
          files: result.files,
          bytes: result.bytesScanned,
        }),
      );
    // Sent again, or no longer in the source, which then cannot give them back.
    forgetBlocksToResend(this.parts.db, bucket.id, resendLeaves);
    // In the file index now, each as the restore left it, or changed since.
    if (restoredThrough > 0) restoredFiles.clearThrough(restoredThrough);
    // Stored again, or no longer the active version.
    if (storeAgainVersion !== undefined) forgetMetadataToStoreAgain(this.parts.db, bucket.id);
    // After the new version is known active: the one it replaced may go now.
    await this.parts.metadata.trim();
    // Last: what the version's storing settled is recorded already, whatever becomes of this.
    if (result.unchanged !== true) await this.rememberVersions(bucket, input.signal);
    return result;
  }

  /**
   * Records the bucket's versions with the one just made. Only a record for browsing while the
   * service cannot be reached: the version is stored whatever becomes of it, so a service that
   * stopped answering right after leaves the record as it was, until the next listing.
   */
  private async rememberVersions(bucket: Bucket, signal: AbortSignal | undefined): Promise<void> {
    try {
      // One attempt, no backoff: a backup stored is not kept waiting on its record.
      const { client } = await this.parts.connection.connect({ retry: NO_RETRY, signal });
      await this.parts.versions.rememberNow(client, bucket);
    } catch (error) {
      // Unreachable, or failing in a way a later try may not (a 429, a 503).
      if (!(error instanceof EngineError) || !(UNREACHABLE.has(error.code) || error.retryable))
        throw error;
    }
  }

  /** Canopy's own folders, which no backup reads: this home, and the embedded service's data. */
  private ownFolders(account: AccountRecord | null | undefined): string[] {
    const folders = [this.parts.deps.home];
    if (account?.mode === 'local' && account.local_data_dir) folders.push(account.local_data_dir);
    return folders;
  }
}
