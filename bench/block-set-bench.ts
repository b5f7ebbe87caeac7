import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { newUuid } from '../main/protocol/index.ts';
import { inheritBlockSet } from '../server/store/block-sets.ts';
import { insertBucket } from '../server/store/buckets.ts';
import { openDatabase } from '../server/store/database.ts';
import { IncomingBlocks } from '../server/store/incoming-blocks.ts';
import { activate } from '../server/store/lifecycle.ts';
import { createUser } from '../server/store/users.ts';
import { findVersion, insertVersion } from '../server/store/versions.ts';

// The service's block-set bookkeeping (server/store/block-sets.ts) for a user who holds
// 100 000 blocks, as for a tree of 100 000 small files: a line of versions in a backup bucket,
// each removing a block and adding a shard of 1 000 new ones. Straight on the store, without
// HTTP, as the figures are the database's. A lookup that scans a table for each block shows
// here as a shard commit of seconds; a push that copies the set, as one of a quarter second.

const HELD = 100_000;
const NEW_PER_VERSION = 1_000;
const VERSIONS = 20;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

export function blockSetBench(workDir: string): string {
  const db = openDatabase(path.join(workDir, 'block-sets.sqlite'));
  try {
    const user = createUser(db, 'bench@example.org', null, 0).id;
    const bucket = insertBucket(
      db,
      { ownerId: user, name: 'Bench', type: 'backup', storageClass: 'hot' },
      0,
    );
    const policy = { outdatedVersionsKept: 5, uploadFailedRetentionMs: 1000 };
    const pushes: number[] = [];
    const shards: number[] = [];
    const activations: number[] = [];
    let previous: string | null = null;
    for (let round = 0; round <= VERSIONS; round += 1) {
      const id = newUuid();
      const pushStart = performance.now();
      db.transaction(() => {
        insertVersion(
          db,
          {
            id,
            bucketId: bucket.id,
            userId: user,
            rootCid: 'root',
            metadataCid: 'metadata',
            expectedDataSize: 1e12,
            previousId: previous,
            validKeys: [],
            carBytes: 1,
            deviceFingerprint: 'bench',
            windowEndsAt: 1e15,
          },
          0,
        );
        inheritBlockSet(db, id, user, previous, new Set([`held-${round}`]));
      })();
      const pushMs = performance.now() - pushStart;
      const incoming = new IncomingBlocks(db);
      const count = round === 0 ? HELD : NEW_PER_VERSION;
      incoming.batch((add) => {
        for (let i = 0; i < count; i += 1)
          add(round === 0 ? `held-${i}` : `new-${round}-${i}`, 1024, i * 1024);
      });
      incoming.settle();
      const shardStart = performance.now();
      db.transaction(() => {
        incoming.markNewToSet(id);
        incoming.storeInPack(`pack-${round}`, user);
        incoming.addToBlockSet(id, user);
      })();
      const shardMs = performance.now() - shardStart;
      incoming.drop();
      const version = findVersion(db, id);
      if (!version) throw new Error('the version vanished');
      const activationStart = performance.now();
      db.transaction(() => activate(db, version, true, policy, 0))();
      const activationMs = performance.now() - activationStart;
      if (round > 0) {
        pushes.push(pushMs);
        shards.push(shardMs);
        activations.push(activationMs);
      }
      previous = id;
    }
    return `block sets          holding ${HELD} blocks, ${VERSIONS} versions each adding ${NEW_PER_VERSION}: push median ${median(pushes).toFixed(1)} ms (slowest ${Math.max(...pushes).toFixed(0)} ms, the one that copies the set), shard commit median ${median(shards).toFixed(1)} ms, activation median ${median(activations).toFixed(1)} ms`;
  } finally {
    db.close();
  }
}
