import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { loadOrCreateServiceKey, type ServiceKey } from './auth/service-key.ts';
import { TokenBuckets } from './auth/token-bucket.ts';
import { BlockStore } from './blocks/block-store.ts';
import type { ServiceOptions } from './options.ts';
import { openDatabase, type Db } from './store/database.ts';
import { hasDueVersions, sweepUploadWindows, type LifecyclePolicy } from './store/lifecycle.ts';
import { takeUnheldBlocks } from './store/block-sets.ts';

/** Everything a route needs, built once per server. */
export class ServiceContext {
  readonly options: ServiceOptions;
  readonly db: Db;
  readonly blocks: BlockStore;
  readonly serviceKey: ServiceKey;
  readonly credentialLimiter: TokenBuckets | null;
  readonly ipLimiter: TokenBuckets | null;
  readonly policy: LifecyclePolicy;
  /** Set once the server listens, unless `publicUrl` was given. */
  storageHost: string;

  constructor(options: ServiceOptions) {
    this.options = options;
    mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    this.db = openDatabase(path.join(options.dataDir, 'service.sqlite'));
    this.blocks = new BlockStore(options.dataDir);
    this.serviceKey = loadOrCreateServiceKey(options.dataDir);
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

  /** Runs `work` in one IMMEDIATE transaction, then unlinks the CARs of deleted versions. */
  transact<T>(work: (deleted: string[]) => T): T {
    const deleted: string[] = [];
    const result = this.db.transaction(() => work(deleted)).immediate();
    for (const id of deleted) this.blocks.removeMetadata(id);
    return result;
  }

  /** Records expired upload windows and retention; cheap when nothing is due. */
  sweep(): void {
    const now = this.now();
    if (!hasDueVersions(this.db, this.policy, now)) return;
    this.transact((deleted) => deleted.push(...sweepUploadWindows(this.db, this.policy, now)));
  }

  /**
   * Deletes blocks no user holds. Row removal and unlink happen in one synchronous step inside
   * the transaction that is also the block-set lock (§11.6), so a concurrent deduplicated
   * upload either sees the row (and keeps the file) or stores its own copy.
   */
  collectGarbage(): number {
    return this.db
      .transaction(() => {
        const cids = takeUnheldBlocks(this.db, 10_000);
        for (const cid of cids) this.blocks.removeBlock(cid);
        return cids.length;
      })
      .immediate();
  }

  close(): void {
    this.db.close();
  }
}
