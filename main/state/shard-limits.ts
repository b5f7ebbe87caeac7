import type { StateDb } from './database.ts';

// The shard size each bucket's storage host is known to take, after it refused a larger one.

/**
 * How long a learned limit holds. A proxy's limit may be raised, after the error that named it
 * for instance; after this, a backup tries full-size shards again and learns anew if refused.
 */
export const SHARD_LIMIT_LIFETIME_MS = 30 * 24 * 60 * 60 * 1000;

/** The largest shard target known to pass for the bucket, or undefined if none is known. */
export function shardLimitOf(db: StateDb, bucketId: string, now: number): number | undefined {
  return db
    .prepare<[string, number], { max_bytes: number }>(
      'SELECT max_bytes FROM shard_limits WHERE bucket_id = ? AND learned_at > ?',
    )
    .get(bucketId, now - SHARD_LIMIT_LIFETIME_MS)?.max_bytes;
}

/** Records the shard target a backup stepped down to and then completed with. */
export function recordShardLimit(
  db: StateDb,
  bucketId: string,
  maxBytes: number,
  now: number,
): void {
  db.prepare(
    `INSERT INTO shard_limits (bucket_id, max_bytes, learned_at) VALUES (?, ?, ?)
     ON CONFLICT (bucket_id) DO UPDATE SET max_bytes = excluded.max_bytes,
       learned_at = excluded.learned_at`,
  ).run(bucketId, maxBytes, now);
}
