import { EngineError } from '../api/index.ts';
import type { Bucket, Metadata } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import { keepRetentionPolicy, retentionPolicyTextOf, type StateDb } from '../state/index.ts';
import type { BucketCatalog } from './bucket-catalog.ts';
import type { BucketVersions } from './bucket-versions.ts';
import {
  keepsAny,
  policyFromText,
  policyOptions,
  policyText,
  versionsKept,
  type KeptBecause,
  type RetentionPolicy,
} from './retention-policy.ts';
import type { ServiceConnection } from './service-connection.ts';
import { whileNoBackupTo } from './while-no-backup.ts';

// Pruning a bucket's versions by a retention policy (retention-policy.ts): one given for the
// while (`canopy versions prune --keep-daily 7`), or the one set for the bucket on this device
// (`canopy versions policy`), which every backup to it from here applies once it is stored.

/** What a prune kept, each with why, and what it removed (or would: a dry run), newest first. */
export interface PrunedVersions {
  readonly kept: ReadonlyArray<{ readonly version: Metadata; readonly because: KeptBecause[] }>;
  readonly removed: readonly Metadata[];
}

export interface PruneRequest {
  readonly bucket: string;
  /** The rules to apply; by default the policy set for the bucket. */
  readonly policy?: RetentionPolicy;
  readonly dryRun: boolean;
  /** Called as each version goes, oldest first. */
  readonly onRemoved?: (version: Metadata) => void;
}

const KEEP_OPTIONS =
  '--keep-last, --keep-hourly, --keep-daily, --keep-weekly, --keep-monthly, --keep-yearly or --keep-within';

function refuseKeepingNothing(policy: RetentionPolicy): void {
  if (!keepsAny(policy))
    throw new EngineError(
      'usage',
      `a retention policy must keep some versions: give ${KEEP_OPTIONS}`,
    );
}

export class VersionRetention {
  constructor(
    /** The Canopy home, where backups take their lock (BackupLock). */
    private readonly home: string,
    private readonly db: StateDb,
    private readonly connection: ServiceConnection,
    private readonly buckets: BucketCatalog,
    private readonly versions: BucketVersions,
  ) {}

  /** Sets the bucket's policy on this device; null clears it. Returns what it set. */
  async setPolicy(input: {
    bucket: string;
    policy: RetentionPolicy | null;
  }): Promise<RetentionPolicy | null> {
    if (input.policy) refuseKeepingNothing(input.policy);
    const bucket = await this.buckets.byName(input.bucket);
    keepRetentionPolicy(this.db, bucket.id, input.policy ? policyText(input.policy) : null);
    return input.policy;
  }

  /** The policy set for the bucket on this device; null when none is. */
  async policyOf(input: { bucket: string }): Promise<RetentionPolicy | null> {
    return this.policySet(await this.buckets.byName(input.bucket));
  }

  /** The policy set for `bucket` here; null when none is. */
  policySet(bucket: Pick<Bucket, 'id' | 'name'>): RetentionPolicy | null {
    const text = retentionPolicyTextOf(this.db, bucket.id);
    if (text === undefined) return null;
    const policy = policyFromText(text);
    // Not one this Canopy reads (a later one set it, with a rule this one does not know):
    // applied in part, it could remove what that rule keeps.
    if (!policy)
      throw new EngineError(
        'conflict',
        `the retention policy set here for bucket "${bucket.name}" is not one this Canopy can read: set it again (canopy versions policy --bucket ${bucket.name} ${KEEP_OPTIONS.replace(' or ', ', ')}, or --clear)`,
      );
    return policy;
  }

  /**
   * Deletes the bucket's versions stored whole that no rule keeps, oldest first, each with its
   * snapshot. A version still uploading, or whose upload failed, is neither counted nor removed;
   * the active version is always kept, and so is one the user pinned in an interactive bucket.
   * With `dryRun`, only says what it would remove. Refused while a backup to the bucket runs.
   */
  async prune(input: PruneRequest): Promise<PrunedVersions> {
    if (input.policy) refuseKeepingNothing(input.policy);
    const { client } = await this.connection.connect();
    const bucket = await this.buckets.byName(input.bucket, client);
    const policy = input.policy ?? this.policySet(bucket);
    if (!policy)
      throw new EngineError(
        'usage',
        `bucket "${bucket.name}" has no retention policy set here: give ${KEEP_OPTIONS}, or set one with canopy versions policy`,
      );
    return whileNoBackupTo(this.home, this.db, bucket, 'prune the versions', () =>
      this.pruneLocked(client, bucket, policy, input),
    );
  }

  /**
   * Applies the policy set for `bucket`, if any, for a backup that holds the bucket's lock and
   * has stored its version: null when none is set.
   */
  async applySetPolicy(
    client: ServiceClient,
    bucket: Bucket,
    onRemoved: (version: Metadata) => void,
  ): Promise<(PrunedVersions & { readonly policy: string }) | null> {
    const policy = this.policySet(bucket);
    if (!policy) return null;
    const pruned = await this.pruneLocked(client, bucket, policy, { dryRun: false, onRemoved });
    return { ...pruned, policy: policyOptions(policy) };
  }

  private async pruneLocked(
    client: ServiceClient,
    bucket: Bucket,
    policy: RetentionPolicy,
    input: Pick<PruneRequest, 'dryRun' | 'onRemoved'>,
  ): Promise<PrunedVersions> {
    const stored = (await this.versions.remembered(client, bucket)).versions.filter(
      (version) => version.state === 'active' || version.state === 'outdated',
    );
    const why = versionsKept(
      stored.map((version) => ({
        id: version.id,
        createdAt: version.created_at,
        active: version.state === 'active',
        // In an interactive bucket a snapshot is the user's own pin (§12: a backup bucket's
        // versions each get one by themselves, which says nothing of the user's wish).
        pinned: bucket.type === 'interactive' && version.snapshot_id !== null,
      })),
      policy,
    );
    const newestFirst = [...stored].sort((a, b) => b.created_at - a.created_at);
    const kept = newestFirst.flatMap((version) => {
      const because = why.get(version.id);
      return because ? [{ version, because }] : [];
    });
    const removed = newestFirst.filter((version) => !why.has(version.id));
    if (!input.dryRun && removed.length > 0) {
      for (const version of [...removed].reverse()) {
        await this.versions.discard(client, bucket, version);
        input.onRemoved?.(version);
      }
      await this.versions.rememberActive(client, bucket);
    }
    return { kept, removed };
  }
}
