import { EngineError, isEngineError, type EngineErrorCode } from '../api/index.ts';
import type { Bucket, Metadata, Snapshot } from '../protocol/index.ts';
import { AnswerCutError, type ServiceClient } from '../service/index.ts';
import {
  forgetActiveVersion,
  forgetVersionTotals,
  lastKnownVersions,
  rememberActiveVersion,
  rememberVersions,
  versionTotalsOf,
  type StateDb,
  type VersionTotals,
} from '../state/index.ts';
import { bucketNamed, type BucketCatalog } from './bucket-catalog.ts';
import { keptUnlessDiskFull } from './kept-unless-disk-full.ts';
import { namedById } from './named-by-id.ts';
import type { MetadataCache } from './metadata-cache.ts';
import type { ServiceConnection } from './service-connection.ts';
import { NO_RETRY, UNREACHABLE } from './unreachable.ts';
import { whileNoBackupTo } from './while-no-backup.ts';

// A bucket's versions and snapshots: listed from the service and remembered on this device
// (for when it cannot be reached), the one a request names, and deleting them.

/** A bucket's versions, or, while the service cannot be reached, the list as last seen. */
export interface VersionsOrLastSeen {
  readonly versions: Metadata[];
  /**
   * What the versions hold, by id, for those whose metadata this device stored or read (another
   * device's version is known once browsed, restored or built on here).
   */
  readonly totals: ReadonlyMap<string, VersionTotals>;
  /** When the list shown was seen; null when it comes from the service now. */
  readonly offlineSince: number | null;
  /** Why the service did not answer; null when it did. */
  readonly offlineBecause: EngineErrorCode | null;
  /** False when the home's disk is full: the list could not be kept for offline use. */
  readonly keptForOffline: boolean;
}

/** What `deleteVersion` deleted, and the bucket's active version after it. */
export interface DeletedVersion {
  readonly versionId: string;
  /** The snapshot that pinned it, deleted with it. */
  readonly snapshotId: string | null;
  readonly activeVersionId: string | null;
}

/** The version `snapshotVersion` pinned, and its snapshot. */
export interface KeptVersion {
  readonly versionId: string;
  readonly snapshot: Snapshot;
  /** True when a snapshot pinned it already: that one is `snapshot`, and none was taken. */
  readonly keptAlready: boolean;
}

/**
 * A request names a version by its id or by a snapshot of it, not both: which one was meant
 * cannot be known, and taking either would restore what the user may not have asked for.
 */
export function refuseVersionAndSnapshot(input: { version?: string; snapshot?: string }): void {
  if (input.version !== undefined && input.snapshot !== undefined)
    throw new EngineError('usage', 'name a version or a snapshot, not both');
}

export class BucketVersions {
  constructor(
    /** The Canopy home, where backups take their lock (BackupLock). */
    private readonly home: string,
    private readonly db: StateDb,
    private readonly connection: ServiceConnection,
    private readonly buckets: BucketCatalog,
    private readonly metadata: MetadataCache,
    private readonly now: () => number,
  ) {}

  async list(input: { bucket: string }): Promise<Metadata[]> {
    const { client } = await this.connection.connect();
    return (await this.remembered(client, await this.buckets.byName(input.bucket, client)))
      .versions;
  }

  /**
   * Records the bucket's versions as the service lists them now: a backup made one, which
   * `canopy versions` and `ls --version` then know while the service cannot be reached.
   */
  async rememberNow(
    client: ServiceClient,
    bucket: { readonly id: string; readonly name: string },
  ): Promise<void> {
    await this.remembered(client, bucket);
  }

  /**
   * The bucket's versions, remembered for when the service cannot be reached; `kept` is false
   * when the home's disk had no room to remember them. The list is given all the same: a full
   * home disk is no reason not to see, and restore, what is backed up.
   */
  async remembered(
    client: ServiceClient,
    bucket: { readonly id: string; readonly name: string },
  ): Promise<{ versions: Metadata[]; kept: boolean }> {
    const versions = await client.listVersions(bucket.id);
    const kept = keptUnlessDiskFull(() =>
      rememberVersions(this.db, {
        bucket_id: bucket.id,
        bucket_name: bucket.name,
        versions_json: JSON.stringify(versions),
        seen_at: this.now(),
      }),
    );
    return { versions, kept };
  }

  /**
   * The bucket's versions; while the service cannot be reached, the list as last seen, with
   * when (`offlineSince`) and why (`offlineBecause`), as browse does.
   */
  async orLastSeen(input: { bucket: string }): Promise<VersionsOrLastSeen> {
    try {
      // One attempt, no backoff: the list as last seen is shown instead of waiting.
      const { client } = await this.connection.connect({ retry: NO_RETRY });
      const { buckets, kept: bucketsKept } = await this.buckets.fetch(client);
      const bucket = bucketNamed(buckets, input.bucket);
      const { versions, kept } = await this.remembered(client, bucket);
      return {
        versions,
        totals: await this.totalsOf(versions),
        offlineSince: null,
        offlineBecause: null,
        keptForOffline: bucketsKept && kept,
      };
    } catch (error) {
      const known = lastKnownVersions(this.db, input.bucket);
      if (!(error instanceof EngineError) || !UNREACHABLE.has(error.code) || !known) throw error;
      const versions = JSON.parse(known.versions_json) as Metadata[];
      return {
        versions,
        totals: await this.totalsOf(versions),
        offlineSince: known.seen_at,
        offlineBecause: error.code,
        // Kept already: it is the list shown.
        keptForOffline: true,
      };
    }
  }

  /**
   * What `versions` hold, for those noted here; a version cached without a note (before notes
   * were kept) is noted from its cached metadata first.
   */
  private async totalsOf(
    versions: readonly Metadata[],
  ): Promise<ReadonlyMap<string, VersionTotals>> {
    const ids = versions.map((version) => version.id);
    const noted = versionTotalsOf(this.db, ids);
    let more = false;
    for (const id of ids)
      if (!noted.has(id) && (await this.metadata.noteCachedTotals(id))) more = true;
    return more ? versionTotalsOf(this.db, ids) : noted;
  }

  /**
   * The bucket's version `id` (or the one whose id alone begins so: named-by-id.ts), as the
   * service lists it now; not_found, in the user's words.
   */
  private async named(client: ServiceClient, bucket: Bucket, id: string): Promise<Metadata> {
    const named = namedById(
      (await this.remembered(client, bucket)).versions,
      id,
      `versions of bucket "${bucket.name}"`,
    );
    if (!named)
      throw new EngineError(
        'not_found',
        `bucket "${bucket.name}" has no version ${id} (canopy versions lists them)`,
      );
    return named;
  }

  /**
   * The version a request names: --version, --snapshot, or the bucket's active version. A named
   * version must be one of the bucket's; with `whole`, one whose data was all stored (active or
   * outdated), since a restore or a verify of a version still uploading, or whose upload failed,
   * would find blocks missing and pass them off as lost.
   */
  async resolve(
    client: ServiceClient,
    input: { bucket: string; version?: string; snapshot?: string },
    whole = false,
  ): Promise<{ readonly versionId: string; readonly bucketId: string; readonly active: boolean }> {
    refuseVersionAndSnapshot(input);
    const bucket = await this.buckets.byName(input.bucket, client);
    if (input.version !== undefined) {
      const named = await this.named(client, bucket, input.version);
      if (whole && (named.state === 'pending' || named.state === 'upload_failed'))
        throw new EngineError(
          'conflict',
          named.state === 'pending'
            ? `version ${named.id} is still being uploaded, so not all of its data is stored: run the backup again to finish it, or name a version stored whole`
            : `the upload of version ${named.id} failed, so not all of its data is stored: name a version stored whole (canopy versions lists them)`,
        );
      return { versionId: named.id, bucketId: bucket.id, active: named.state === 'active' };
    }
    if (input.snapshot !== undefined) {
      const snapshot = await this.snapshotNamed(client, bucket, input.snapshot);
      return { versionId: snapshot.metadata_id, bucketId: bucket.id, active: false };
    }
    const active = (await this.remembered(client, bucket)).versions.find(
      (version) => version.state === 'active',
    );
    if (!active) throw new EngineError('not_found', `bucket "${input.bucket}" has no backup yet`);
    rememberActiveVersion(this.db, {
      bucket_id: bucket.id,
      bucket_name: bucket.name,
      version_id: active.id,
      seen_at: this.now(),
    });
    return { versionId: active.id, bucketId: bucket.id, active: true };
  }

  /**
   * The bucket's snapshot `id`, or the one whose id alone begins so (named-by-id.ts); not_found,
   * in the user's words.
   */
  private async snapshotNamed(
    client: ServiceClient,
    bucket: Bucket,
    id: string,
  ): Promise<Snapshot> {
    let miss: unknown;
    try {
      return await client.getSnapshot(bucket.id, id);
    } catch (error) {
      // The service's 404 names no snapshot (§2: also for an id that is not a whole UUID).
      if (!isEngineError(error, 'not_found')) throw error;
      miss = error;
    }
    const named = namedById(
      await client.listSnapshots(bucket.id),
      id,
      `snapshots of bucket "${bucket.name}"`,
    );
    if (named) return named;
    throw new EngineError(
      'not_found',
      `bucket "${bucket.name}" has no snapshot ${id} (canopy snapshots lists them)`,
      { cause: miss },
    );
  }

  async listSnapshots(input: { bucket: string }): Promise<Snapshot[]> {
    const { client } = await this.connection.connect();
    return client.listSnapshots((await this.buckets.byName(input.bucket)).id);
  }

  /**
   * Pins a version with a snapshot (§12), so that the service keeps it until the snapshot is
   * deleted: an interactive bucket keeps only its few latest outdated versions otherwise. By
   * default the active version. One pinned already is told so, with the snapshot that pins it:
   * the user's aim, that it is kept, holds.
   */
  async snapshotVersion(input: { bucket: string; version?: string }): Promise<KeptVersion> {
    const { client } = await this.connection.connect();
    const bucket = await this.buckets.byName(input.bucket, client);
    const named = await this.namedOrActive(client, bucket, input.version);
    if (named.state === 'pending')
      throw new EngineError(
        'conflict',
        `version ${named.id} is still being uploaded: run the backup again to finish it, then take its snapshot`,
      );
    if (named.state === 'upload_failed')
      throw new EngineError(
        'conflict',
        `the upload of version ${named.id} failed, so not all of its data is stored: take the snapshot of a version stored whole (canopy versions lists them)`,
      );
    if (named.snapshot_id !== null)
      return this.keptAlready(client, bucket, named.id, named.snapshot_id);
    let snapshot: Snapshot;
    try {
      snapshot = await client.snapshotVersion(named.id);
    } catch (error) {
      const answerLost = error instanceof AnswerCutError;
      if (!answerLost && !isEngineError(error, 'conflict') && !isEngineError(error, 'not_found'))
        throw error;
      // Changed meanwhile, by another device: pinned there, or deleted or pruned. Or the answer
      // broke off after the service made the snapshot: this request made it.
      const now = (await this.remembered(client, bucket)).versions.find((v) => v.id === named.id);
      if (now?.snapshot_id != null) {
        const kept = await this.keptAlready(client, bucket, now.id, now.snapshot_id);
        return answerLost ? { ...kept, keptAlready: false } : kept;
      }
      if (now) throw error;
      throw new EngineError(
        'not_found',
        `version ${named.id} of bucket "${bucket.name}" was deleted meanwhile (canopy versions lists those left)`,
        { cause: error },
      );
    }
    // The versions as remembered here for offline use now show the pin.
    await this.remembered(client, bucket);
    return { versionId: named.id, snapshot, keptAlready: false };
  }

  private async keptAlready(
    client: ServiceClient,
    bucket: Bucket,
    versionId: string,
    snapshotId: string,
  ): Promise<KeptVersion> {
    return {
      versionId,
      snapshot: await client.getSnapshot(bucket.id, snapshotId),
      keptAlready: true,
    };
  }

  /** The bucket's version `id` (named), or its active version when no id is given. */
  private async namedOrActive(
    client: ServiceClient,
    bucket: Bucket,
    id: string | undefined,
  ): Promise<Metadata> {
    if (id !== undefined) return this.named(client, bucket, id);
    const active = (await this.remembered(client, bucket)).versions.find(
      (version) => version.state === 'active',
    );
    if (!active) throw new EngineError('not_found', `bucket "${bucket.name}" has no backup yet`);
    return active;
  }

  /**
   * Deletes a snapshot: the pin goes, and its version, if outdated, is pruned from then on as
   * any outdated version (§12), at once when the bucket has more than the service keeps.
   */
  async deleteSnapshot(input: {
    bucket: string;
    snapshot: string;
  }): Promise<{ snapshot: Snapshot; versionPruned: boolean }> {
    const { client } = await this.connection.connect();
    const bucket = await this.buckets.byName(input.bucket, client);
    const snapshot = await this.snapshotNamed(client, bucket, input.snapshot);
    try {
      await client.deleteSnapshot(bucket.id, snapshot.id);
    } catch (error) {
      // Deleted meanwhile, by another device: told as a snapshot the bucket does not have.
      if (!isEngineError(error, 'not_found')) throw error;
      throw new EngineError(
        'not_found',
        `bucket "${bucket.name}" has no snapshot ${input.snapshot} (canopy snapshots lists them)`,
        { cause: error },
      );
    }
    const { versions } = await this.remembered(client, bucket);
    const versionPruned = !versions.some((version) => version.id === snapshot.metadata_id);
    if (versionPruned) await this.metadata.forget(snapshot.metadata_id);
    return { snapshot, versionPruned };
  }

  /**
   * Deletes a version, and the snapshot that pins it (naming the version is the user's intent;
   * in a backup bucket every version has one). Its blocks no other version holds leave the
   * service. A version still being uploaded is refused: the next backup finishes it; so is any
   * while a backup to the bucket runs. When the active version goes, the service makes the most
   * recent outdated one active.
   */
  async deleteVersion(input: { bucket: string; version: string }): Promise<DeletedVersion> {
    const { client } = await this.connection.connect();
    const bucket = await this.buckets.byName(input.bucket, client);
    return whileNoBackupTo(this.home, this.db, bucket, 'delete the version', async () => {
      const named = await this.named(client, bucket, input.version);
      if (named.state === 'pending')
        throw new EngineError(
          'conflict',
          `version ${named.id} is still being uploaded: run the backup again to finish it, or wait for its upload window to end`,
        );
      await this.discard(client, bucket, named);
      const active = await this.rememberActive(client, bucket);
      return {
        versionId: named.id,
        snapshotId: named.snapshot_id,
        activeVersionId: active?.id ?? null,
      };
    });
  }

  /**
   * Deletes version `named` and the snapshot that pins it, and forgets what this computer kept
   * of it. Gone already is done: the service prunes an outdated version once its snapshot goes,
   * when it keeps that many unpinned ones already.
   */
  async discard(client: ServiceClient, bucket: Bucket, named: Metadata): Promise<void> {
    if (named.snapshot_id !== null) {
      try {
        await client.deleteSnapshot(bucket.id, named.snapshot_id);
      } catch (error) {
        // Deleted meanwhile (by another device, or by this command before it was cut short).
        if (!isEngineError(error, 'not_found')) throw error;
      }
    }
    await client.discardVersion(named.id);
    await this.metadata.forget(named.id);
    forgetVersionTotals(this.db, named.id);
  }

  /** The bucket's active version now, remembered for offline use (none: forgotten). */
  async rememberActive(client: ServiceClient, bucket: Bucket): Promise<Metadata | undefined> {
    const active = (await this.remembered(client, bucket)).versions.find(
      (version) => version.state === 'active',
    );
    if (active)
      rememberActiveVersion(this.db, {
        bucket_id: bucket.id,
        bucket_name: bucket.name,
        version_id: active.id,
        seen_at: this.now(),
      });
    else forgetActiveVersion(this.db, bucket.id);
    return active;
  }
}
