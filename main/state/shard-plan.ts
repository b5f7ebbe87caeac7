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
  /**
   * Up to `count` blocks of shard `shard`, in order from position `from`; fewer only at its
   * end. Blocks added are written first.
   */
  blocksOf(shard: number, from: number, count: number): QueuedBlock[];
  /**
   * Takes the blocks whose CID is one of `cids` out of shard `shard`; those after them move
   * up, so that its positions run from 0 again. Returns how many blocks it keeps.
   */
  dropBlocks(shard: number, cids: ReadonlySet<string>): number;
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
    blocksOf(shard, from, count) {
      flush();
      return db
        .prepare<[number, number, number, number], QueuedBlock>(
          `SELECT cid, path, offset, length FROM planned_blocks
           WHERE plan_id = ? AND shard = ? AND position >= ? ORDER BY position LIMIT ?`,
        )
        .all(id, shard, from, count);
    },
    dropBlocks(shard, cids) {
      flush();
      return db
        .transaction(() => {
          db.prepare(
            `DELETE FROM planned_blocks WHERE plan_id = ? AND shard = ?
             AND cid IN (SELECT value FROM json_each(?))`,
          ).run(id, shard, JSON.stringify([...cids]));
          // Renumbered through negative positions, so no two rows ever share a key.
          db.prepare(
            `UPDATE planned_blocks SET position = -1 - numbered.position
             FROM (SELECT position AS old, ROW_NUMBER() OVER (ORDER BY position) - 1 AS position
                   FROM planned_blocks WHERE plan_id = @plan AND shard = @shard) AS numbered
             WHERE plan_id = @plan AND shard = @shard AND planned_blocks.position = numbered.old`,
          ).run({ plan: id, shard });
          db.prepare(
            'UPDATE planned_blocks SET position = -1 - position WHERE plan_id = ? AND shard = ?',
          ).run(id, shard);
          return (
            db
              .prepare<[number, number], number>(
                'SELECT COUNT(*) FROM planned_blocks WHERE plan_id = ? AND shard = ?',
              )
              .pluck()
              .get(id, shard) ?? 0
          );
        })
        .immediate();
    },
    discard() {
      pending.length = 0;
      db.prepare('DELETE FROM shard_plans WHERE id = ?').run(id);
    },
  };
}
