import type { StateDb } from './database.ts';
import type { QueuedBlock } from './upload-queue.ts';

// Where a backup writes the blocks of the shards it plans, as it plans them: a shard planned
// from the source is a list of where its blocks lie, one row per block, and a backup of many
// small files plans hundreds of thousands. The upload queue takes the blocks of the shards the
// host needs when it records the upload (UploadQueue.record), and the plan goes.

/** Blocks written to the database at once, in one transaction. */
const BLOCKS_PER_WRITE = 1000;

export interface ShardPlan {
  readonly id: number;
  /** Adds the block at `position` (0, 1, …) of the plan's shard numbered `shard` (0, 1, …). */
  add(shard: number, position: number, block: QueuedBlock): void;
  /** Writes the blocks added and not yet written. */
  flush(): void;
  /** Drops the plan and every block of it (a recorded plan is gone already). */
  discard(): void;
}

/**
 * A new plan for the next upload to `bucketId`. Backups to one bucket take turns (BackupLock),
 * so a plan of that bucket still here was left by a backup that never ended: it is dropped.
 */
export function startShardPlan(db: StateDb, bucketId: string): ShardPlan {
  const id = db
    .transaction(() => {
      db.prepare('DELETE FROM shard_plans WHERE bucket_id = ?').run(bucketId);
      return Number(
        db.prepare('INSERT INTO shard_plans (bucket_id) VALUES (?)').run(bucketId).lastInsertRowid,
      );
    })
    .immediate();
  const insert = db.prepare(
    'INSERT INTO planned_blocks (plan_id, shard, position, cid, path, offset, length) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  const pending: Array<{ shard: number; position: number; block: QueuedBlock }> = [];
  const write = db.transaction(() => {
    for (const { shard, position, block } of pending)
      insert.run(id, shard, position, block.cid, block.path, block.offset, block.length);
  });
  const flush = (): void => {
    if (pending.length === 0) return;
    write.immediate();
    pending.length = 0;
  };
  return {
    id,
    add(shard, position, block) {
      pending.push({ shard, position, block });
      if (pending.length >= BLOCKS_PER_WRITE) flush();
    },
    flush,
    discard() {
      pending.length = 0;
      db.prepare('DELETE FROM shard_plans WHERE id = ?').run(id);
    },
  };
}
