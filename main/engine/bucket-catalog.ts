import { EngineError, isEngineError } from '../api/index.ts';
import { loadOrCreateKeyPair } from '../identity/index.ts';
import {
  trimWhiteSpace,
  type Bucket,
  type BucketType,
  type StorageClass,
} from '../protocol/index.ts';
import { AnswerCutError, type ServiceClient } from '../service/index.ts';
import {
  BackupLock,
  bucketIdsKept,
  forgetBucket,
  homeId,
  releaseFreeSpace,
  removeAbandonedStaging,
  renameKnownBucket,
  upsertBucket,
  upsertBuckets,
  uploadQueue,
  versionIdsKeptOf,
  type BucketRecord,
  type StateDb,
} from '../state/index.ts';
import type { EngineDeps } from './engine-deps.ts';
import type { MetadataCache } from './metadata-cache.ts';
import { UNREACHABLE } from './unreachable.ts';
import { whileNoBackupTo } from './while-no-backup.ts';
import { keptUnlessDiskFull } from './kept-unless-disk-full.ts';
import type { ServiceConnection } from './service-connection.ts';

// The account's buckets: listed from the service and recorded on this device (for browsing
// while offline), found by name, created with a bucket key of their own, renamed, deleted.

/** The bucket of `buckets` named `name`; not_found, naming it, when there is none. */
export function bucketNamed(buckets: readonly Bucket[], name: string): Bucket {
  const bucket = buckets.find((candidate) => candidate.name === name);
  if (!bucket)
    throw new EngineError(
      'not_found',
      `no bucket named "${name}" (canopy buckets lists them; canopy buckets create makes one)`,
    );
  return bucket;
}

export class BucketCatalog {
  constructor(
    private readonly deps: EngineDeps,
    private readonly db: StateDb,
    private readonly connection: ServiceConnection,
    private readonly metadata: MetadataCache,
    private readonly now: () => number,
  ) {}

  async list(): Promise<Bucket[]> {
    const { client } = await this.connection.connect();
    return this.refresh(client);
  }

  /** The account's buckets from the service, recorded locally. */
  private async refresh(client: ServiceClient): Promise<Bucket[]> {
    return (await this.fetch(client)).buckets;
  }

  /**
   * The account's buckets from the service, recorded locally; `kept` is false when the home's
   * disk had no room to record them. They are given all the same: the record only serves later
   * requests, and a full home disk is no reason not to see what is backed up.
   */
  async fetch(client: ServiceClient): Promise<{ buckets: Bucket[]; kept: boolean }> {
    const buckets = await client.listBuckets();
    await this.forgetGone(client, buckets);
    const kept = keptUnlessDiskFull(() => {
      upsertBuckets(
        this.db,
        buckets.map((bucket) => ({
          id: bucket.id,
          name: bucket.name,
          type: bucket.type,
          storage_class: bucket.storage_class,
          bucket_key_account: null,
          bucket_key_fingerprint: null,
          updated_at: this.now(),
        })),
      );
    });
    return { buckets, kept };
  }

  /** The bucket named `name`, as the service lists it now (recorded locally). */
  async byName(name: string, client?: ServiceClient): Promise<Bucket> {
    const buckets = client ? await this.refresh(client) : await this.list();
    return bucketNamed(buckets, name);
  }

  async create(input: {
    name: string;
    type: BucketType;
    storageClass: StorageClass;
  }): Promise<Bucket> {
    const { client } = await this.connection.connect();
    const keyAccount = `bucket-key:${homeId(this.db)}:${this.now()}:${Math.random().toString(36).slice(2)}`;
    const key = await loadOrCreateKeyPair(this.deps.secrets, keyAccount);
    let created;
    try {
      created = await client.createBucket({ ...input, bucketKeyPem: key.pem });
    } catch (error) {
      // The server answered 200 and the answer broke off: the bucket is made, with this key.
      const made = error instanceof AnswerCutError ? await this.madeUnheard(client, input) : null;
      if (made) {
        this.record(made, keyAccount, key.fingerprint);
        return client.getBucket(made.id);
      }
      await this.deps.secrets.delete(keyAccount);
      if (error instanceof EngineError && error.code === 'conflict') {
        throw new EngineError('conflict', `a bucket named "${input.name}" already exists`, {
          cause: error,
        });
      }
      throw error;
    }
    this.record(created, keyAccount, created.initial_bucket_key.fingerprint);
    return client.getBucket(created.id);
  }

  /**
   * The bucket a create whose answer was lost made: the one of its name. Another of that name
   * would have been refused (409), and so would this one be, made and then renamed or deleted
   * by another device since; so none is null, and the create's error stands.
   */
  private async madeUnheard(
    client: ServiceClient,
    input: { readonly name: string },
  ): Promise<Bucket | null> {
    // As the service keeps it (§3).
    const name = trimWhiteSpace(input.name);
    return (await client.listBuckets()).find((bucket) => bucket.name === name) ?? null;
  }

  /** Records a bucket this device made, with the bucket key it made it with. */
  private record(
    bucket: Pick<Bucket, 'id' | 'name' | 'type' | 'storage_class'>,
    keyAccount: string,
    keyFingerprint: string,
  ): void {
    upsertBucket(this.db, {
      id: bucket.id,
      name: bucket.name,
      type: bucket.type,
      storage_class: bucket.storage_class,
      bucket_key_account: keyAccount,
      bucket_key_fingerprint: keyFingerprint,
      updated_at: this.now(),
    });
  }

  async rename(input: { name: string; newName: string }): Promise<Bucket> {
    const { client } = await this.connection.connect();
    const bucket = await this.byName(input.name);
    try {
      await client.updateBucket(bucket.id, { name: input.newName });
    } catch (error) {
      if (error instanceof EngineError && error.code === 'conflict') {
        throw new EngineError('conflict', `a bucket named "${input.newName}" already exists`, {
          cause: error,
        });
      }
      throw error;
    }
    // Only the record of a name: a disk too full for it leaves the old name until the next
    // listing of the buckets puts the new one here too.
    keptUnlessDiskFull(() => renameKnownBucket(this.db, bucket.id, input.newName));
    return client.getBucket(bucket.id);
  }

  /**
   * Deletes the bucket on the service, then what this device keeps of it (forgetKept). Refused
   * while a backup to it runs, whose records this would pull from under it. The bucket is
   * deleted once the service says so: with the home's disk too full to forget it here, the
   * next listing of the buckets forgets it (forgetGone).
   */
  async delete(input: { name: string }): Promise<void> {
    const { client } = await this.connection.connect();
    const bucket = await this.byName(input.name);
    await whileNoBackupTo(this.deps.home, this.db, bucket, 'delete the bucket', async () => {
      const versions = await client.listVersions(bucket.id);
      await client.deleteBucket(bucket.id);
      await this.forgetKept(
        bucket.id,
        versions.map((version) => version.id),
      );
    });
  }

  /**
   * Forgets what this device keeps of the buckets it keeps something of that `listed`, the
   * account's buckets as the service lists them now, lacks: deleted from another device, or
   * here by a command that could not forget them then (its disk was full). Each is asked for
   * first, and forgotten only once the service answers that it has no such bucket. One a
   * backup is running to (it fails as its bucket is gone) is left to a later listing, and so
   * is all of it while the home's disk is full.
   */
  private async forgetGone(client: ServiceClient, listed: readonly Bucket[]): Promise<void> {
    const live = new Set(listed.map((bucket) => bucket.id));
    for (const id of bucketIdsKept(this.db)) {
      if (live.has(id) || !(await isGone(client, id))) continue;
      const lock = BackupLock.tryAcquire(this.deps.home, id);
      if (!lock) continue;
      try {
        if (!(await this.forgetKept(id, []))) return;
      } finally {
        lock.release();
      }
    }
  }

  /**
   * Forgets what this device keeps of bucket `id`, deleted on the service: its state (the file
   * index of the folders backed up to it, the versions last seen, an unfinished upload and its
   * staged files), the copies of its versions' metadata (`versionIds`, and those its state
   * names), and its bucket key. False when the home's disk was too full to forget its state:
   * nothing of it is forgotten then.
   */
  private async forgetKept(id: string, versionIds: readonly string[]): Promise<boolean> {
    const versions = new Set([...versionIds, ...versionIdsKeptOf(this.db, id)]);
    let record: BucketRecord | undefined;
    if (!keptUnlessDiskFull(() => (record = forgetBucket(this.db, id)))) return false;
    for (const version of versions) await this.metadata.forget(version);
    await removeAbandonedStaging(this.metadata.stagingRoot, uploadQueue(this.db).stagingDirs());
    if (record?.bucket_key_account) await this.deps.secrets.delete(record.bucket_key_account);
    // Its records' room goes back to the disk too, as its metadata copies' did.
    releaseFreeSpace(this.db);
    return true;
  }
}

/**
 * Whether the service answers that it has no bucket `id` for this account (any more). False
 * while it cannot answer: the buckets were listed, which is what was asked, and a later listing
 * asks again.
 */
async function isGone(client: ServiceClient, id: string): Promise<boolean> {
  try {
    await client.getBucket(id);
    return false;
  } catch (error) {
    if (isEngineError(error, 'not_found')) return true;
    if (isEngineError(error) && UNREACHABLE.has(error.code)) return false;
    throw error;
  }
}
