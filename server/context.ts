import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { loadOrCreateServiceKey, type ServiceKey } from './auth/service-key.ts';
import { TokenBuckets } from './auth/token-bucket.ts';
import { BlockStore } from './blocks/block-store.ts';
import { SERVICE_DATABASE_FILE } from './data-dir.ts';
import type { ServiceOptions } from './options.ts';
import { openDatabase, releaseFreePages, type Db } from './store/database.ts';
import { copyDatabase, type DatabaseCopy } from './store/database-copy.ts';
import { allChunkFileIds, deadChunkFiles, forgetChunkFile } from './store/metadata-chunks.ts';
import { hasDueVersions, sweepUploadWindows, type LifecyclePolicy } from './store/lifecycle.ts';
import { clearUploadPins, takeUnheldBlocks } from './store/stored-blocks.ts';
import { allPackIds } from './store/packs.ts';
import { releaseCopies, type ReleasedCopies } from './store/released-copies.ts';
import { compactSparsePacks } from './blocks/pack-compaction.ts';
import { compactChunkFiles } from './blocks/chunk-file-compaction.ts';
import { CompactionFailed, type PassedOver } from './blocks/compact-each.ts';
import { isOutOfSpace } from './store/out-of-space.ts';
import { addEgress } from './store/egress.ts';
import { touchLastSeen } from './store/device-keys.ts';
import { UnreadableBlocks } from './blocks/unreadable-blocks.ts';

/** Everything a route needs, built once per server. */
export class ServiceContext {
  readonly options: ServiceOptions;
  readonly db: Db;
  readonly blocks: BlockStore;
  readonly serviceKey: ServiceKey;
  readonly credentialLimiter: TokenBuckets | null;
  readonly ipLimiter: TokenBuckets | null;
  readonly policy: LifecyclePolicy;
  /** Blocks this disk failed to read while an answer was sent (blocks/car). */
  readonly unreadableBlocks = new UnreadableBlocks();
  /** Set once the server listens, unless `publicUrl` was given. */
  storageHost: string;
  private compaction: Promise<number> | undefined;
  /** Packs compaction failed on (a damaged file), left alone until they change (PassedOver). */
  private readonly uncompactable: PassedOver = new Map();
  private chunkCompaction: Promise<number> | undefined;
  /** Files of metadata chunks compaction failed on, as `uncompactable`. */
  private readonly uncompactableChunkFiles: PassedOver = new Map();
  /** A `housekeep` failed since the last sweep. */
  private housekeepingOwed = false;
  /** The rows countEgress and noteSeen changed. */
  private countingChanges = 0;
  /** Pages this process gave back to the disk (releaseFreePages): see changesWorthACopy. */
  private pagesReleased = 0;
  /** Where `housekeep` reports what failed; the server's log once it has one (app.ts). */
  onHousekeepingFailure: (error: unknown, what: string) => void = (error, what) => {
    process.emitWarning(`could not ${what}: ${String(error)}`);
  };
  /** What a read-only service serves from (ServiceOptions.readOnly). */
  private readonly databaseCopy: DatabaseCopy | undefined;

  constructor(options: ServiceOptions) {
    this.options = options;
    const database = path.join(options.dataDir, SERVICE_DATABASE_FILE);
    if (options.readOnly) {
      this.databaseCopy = copyDatabase(database, options.readOnlyCopyDir);
      try {
        this.db = openDatabase(this.databaseCopy.file);
      } catch (error) {
        this.databaseCopy.remove();
        throw error;
      }
    } else {
      mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
      this.db = openDatabase(database);
    }
    try {
      this.blocks = new BlockStore(options.dataDir, { readOnly: options.readOnly === true });
      this.serviceKey = loadOrCreateServiceKey(options.dataDir, {
        readOnly: options.readOnly === true,
      });
    } catch (error) {
      // Nothing is left open, nor a copy of the database left behind in the temporary folder.
      this.close();
      throw error;
    }
    this.credentialLimiter = options.credentialRateLimit
      ? new TokenBuckets(options.credentialRateLimit)
      : null;
    this.ipLimiter = options.ipRateLimit ? new TokenBuckets(options.ipRateLimit) : null;
    this.policy = {
      outdatedVersionsKept: options.outdatedVersionsKept,
      uploadFailedRetentionMs: options.uploadFailedRetentionMs,
    };
    this.storageHost = options.publicUrl ?? '';
  }

  now(): number {
    return this.options.clock();
  }

  /**
   * Counts `bytes` served to user `userId` (store/egress.ts). Like noteSeen, it only keeps
   * count: see changesWorthACopy.
   */
  countEgress(userId: string, bytes: number): void {
    this.countingChanges += addEgress(this.db, userId, bytes, this.now());
  }

  /** Records that the device key `keyId` made a request at `now`, to the minute or so. */
  noteSeen(keyId: string, now: number): void {
    this.countingChanges += touchLastSeen(this.db, keyId, now, this.options.lastSeenGranularityMs);
  }

  /**
   * The rows this process changed in the database, but those that only keep count (bytes
   * served, when a device was last seen): those alone do not make the database worth copying
   * again when the service closes. The copy is kept for the backups it names, and each command
   * run a minute after the last, a restore above all, copied a database of 178 MB whole (1.1 s)
   * for its counts. A copy put back misses the counts since it was made, as a power loss may
   * miss the last ones. Pages given back to the disk count too, though no row changed: the
   * copy made before still holds them, and deleting a bucket of 300 000 files left one of
   * 132 MB beside a database of 0.2 MB until the next backup.
   */
  changesWorthACopy(): number {
    const changes = this.db.prepare<[], number>('SELECT total_changes()').pluck().get() ?? 0;
    return changes - this.countingChanges + this.pagesReleased;
  }

  /**
   * Runs `work` in one IMMEDIATE transaction, then unlinks the CARs of deleted versions stored
   * whole and retires the files of metadata chunks no CAR names any more.
   */
  transact<T>(work: (deleted: string[]) => T): T {
    const deleted: string[] = [];
    const result = this.db.transaction(() => work(deleted)).immediate();
    if (deleted.length > 0)
      this.housekeep('free the metadata of deleted versions', () => {
        for (const id of deleted) this.blocks.removeMetadata(id);
        this.retireDeadChunkFiles();
      });
    return result;
  }

  /**
   * Runs work that frees bytes after a change has committed. Its failure (a file that would not
   * move, a disk error) must not turn the committed change into an error for the device, which
   * would try it again: it is reported, and the sweep tries the files of chunks again
   * (`sweep`); what else it left, the next start's recovery clears.
   */
  housekeep(what: string, work: () => void): void {
    try {
      work();
    } catch (error) {
      this.housekeepingOwed = true;
      this.onHousekeepingFailure(error, what);
    }
  }

  /** Deletes blocks no user holds, after a change that let some go; see `housekeep`. */
  collectGarbageAfterCommit(): void {
    this.housekeep('delete blocks no one holds', () => this.collectGarbage());
  }

  /** Retires the files of metadata chunks none of which is named, then forgets them. */
  retireDeadChunkFiles(): number {
    const dead = deadChunkFiles(this.db);
    for (const id of dead) {
      this.blocks.metadataChunks.retire(id);
      forgetChunkFile(this.db, id);
    }
    return dead.length;
  }

  /** Records expired upload windows and retention; cheap when nothing is due. */
  sweep(): void {
    if (this.housekeepingOwed) {
      this.housekeepingOwed = false;
      this.housekeep('free the metadata of deleted versions', () => this.retireDeadChunkFiles());
    }
    const now = this.now();
    if (!hasDueVersions(this.db, this.policy, now)) return;
    this.transact((deleted) => deleted.push(...sweepUploadWindows(this.db, this.policy, now)));
  }

  /**
   * Deletes blocks no user holds. The rows go in a transaction that is also the block-set lock
   * (§11.6), so a concurrent deduplicated upload either sees the row (and its bytes stay) or
   * stores its own copy. Bytes are freed after the commit: a block file of its own is
   * unlinked, and a pack left with no live block is retired.
   */
  collectGarbage(): number {
    const { released, count } = this.db
      .transaction(() => {
        const freed = takeUnheldBlocks(this.db, 10_000);
        return { released: releaseCopies(this.db, freed), count: freed.length };
      })
      .immediate();
    this.removeReleased(released);
    return count;
  }

  /** Frees the bytes of copies released in a transaction that has committed. */
  removeReleased(released: ReleasedCopies): void {
    for (const cid of released.legacy) this.blocks.removeLegacyBlock(cid);
    for (const pack of released.emptied) this.blocks.retirePack(pack);
  }

  /**
   * Rewrites packs that are mostly dead bytes, a few per call. One runs at a time; `close`
   * waits for it. Rejects when a pack could not be rewritten; the others still were.
   */
  compactPacks(max = 4): Promise<number> {
    this.compaction ??= compactSparsePacks(this, max, this.uncompactable).finally(() => {
      this.compaction = undefined;
    });
    return this.compaction;
  }

  /**
   * Rewrites files of metadata chunks that are mostly dead bytes, a few per call; as
   * compactPacks.
   */
  compactChunkFiles(max = 4): Promise<number> {
    this.chunkCompaction ??= compactChunkFiles(this, max, this.uncompactableChunkFiles).finally(
      () => {
        this.chunkCompaction = undefined;
      },
    );
    return this.chunkCompaction;
  }

  /**
   * Frees what deletions left, for up to `budgetMs` of real time: blocks no one holds, then
   * packs and files of metadata chunks that are mostly dead bytes, one at a time, then the
   * database's free pages. It is for a service that lives for one command (the CLI's embedded
   * one), whose sweep never comes round: without it, a deleted bucket's blocks past the first
   * batch, and the dead bytes of every pack a deletion left half full, would stay on the disk
   * for good. What the budget leaves, the next call goes on with (a pack started is finished,
   * so one may run past it). Failures are reported (`housekeep`), never thrown: the command's
   * own work is done.
   */
  async tidy(budgetMs: number): Promise<void> {
    if (this.options.readOnly === true) return;
    const deadline = performance.now() + budgetMs;
    const inTime = (): boolean => performance.now() < deadline;
    this.housekeep('record expired upload windows', () => this.sweep());
    for (let more = true; more && inTime();) {
      more = false;
      this.housekeep('delete blocks no one holds', () => {
        more = this.collectGarbage() > 0;
      });
    }
    await this.compactOneByOne(inTime, () => this.compactPacks(1), 'compact packs');
    await this.compactOneByOne(
      inTime,
      () => this.compactChunkFiles(1),
      'compact files of metadata chunks',
    );
    this.releaseFreePages(inTime);
  }

  /**
   * Gives the database's free pages back to the disk while `inTime` holds, once a large
   * deletion left many (store/database.ts); a failure is reported (`housekeep`).
   */
  releaseFreePages(inTime: () => boolean): void {
    this.housekeep("give the database's free pages back to the disk", () => {
      this.pagesReleased += releaseFreePages(this.db, inTime);
    });
  }

  /** Calls `compactOne` while it finds one to compact and `inTime` holds; see `tidy`. */
  private async compactOneByOne(
    inTime: () => boolean,
    compactOne: () => Promise<number>,
    what: string,
  ): Promise<void> {
    while (inTime()) {
      try {
        if ((await compactOne()) === 0) return;
      } catch (error) {
        this.onHousekeepingFailure(error, what);
        // A file that failed is passed over until it changes (PassedOver): the loop goes on with
        // the others. Anything else (the database unreadable, its disk gone) would only fail
        // again.
        if (!(error instanceof CompactionFailed)) return;
      }
    }
  }

  /** Clears what a crash left in the block store; only under the exclusive ServingLock. */
  recoverStore(): { staged: number; orphanPacks: number; uploadPins: number } {
    const store = this.blocks.recover(allPackIds(this.db));
    this.blocks.metadataChunks.removeOrphans(allChunkFileIds(this.db));
    try {
      // Files a crash left unretired after their last chunk went.
      this.retireDeadChunkFiles();
      return { ...store, uploadPins: clearUploadPins(this.db) };
    } catch (error) {
      // A disk full to the last byte must still serve its backups for restoring. The pins only
      // keep blocks from garbage collection, and a dead file of chunks only takes room; a later
      // start with room lets them go.
      if (!isOutOfSpace(error)) throw error;
      return { ...store, uploadPins: 0 };
    }
  }

  /** Waits for background store work (compaction) to end; their failures were reported. */
  async settle(): Promise<void> {
    await this.compaction?.catch(() => undefined);
    await this.chunkCompaction?.catch(() => undefined);
  }

  close(): void {
    try {
      this.db.close();
    } finally {
      this.databaseCopy?.remove();
    }
  }
}
