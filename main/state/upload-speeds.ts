import type { StateDb } from './database.ts';

// Each bucket's upload speed as observed, so the next backup can size its shards for it.

/** The bucket's smoothed upload speed, or undefined before its first timed upload. */
export function uploadSpeedOf(db: StateDb, bucketId: string): number | undefined {
  return db
    .prepare<[string], { bytes_per_second: number }>(
      'SELECT bytes_per_second FROM upload_speeds WHERE bucket_id = ?',
    )
    .get(bucketId)?.bytes_per_second;
}

/**
 * The upload speed a backup to the bucket should expect: the bucket's own, or, for a bucket not
 * yet timed, the speed last measured for another bucket of the account logged in (its buckets
 * share this computer's link to one server); undefined when none was.
 */
export function expectedUploadSpeedOf(db: StateDb, bucketId: string): number | undefined {
  return (
    uploadSpeedOf(db, bucketId) ??
    db
      .prepare<[], { bytes_per_second: number }>(
        `SELECT upload_speeds.bytes_per_second FROM upload_speeds
         JOIN buckets ON buckets.id = upload_speeds.bucket_id
         ORDER BY upload_speeds.observed_at DESC LIMIT 1`,
      )
      .get()?.bytes_per_second
  );
}

/**
 * Records a backup's timed shards: `bytes` sent in `ms`. The new speed counts as much as all
 * earlier ones together, so a link that changed is followed within a backup or two, and one
 * odd backup does not swing the next one's shards from one end to the other.
 */
export function recordUploadSpeed(
  db: StateDb,
  bucketId: string,
  sample: { readonly bytes: number; readonly ms: number },
  now: number,
): void {
  if (sample.bytes <= 0 || sample.ms <= 0) return;
  const observed = (sample.bytes * 1000) / sample.ms;
  const previous = uploadSpeedOf(db, bucketId);
  const speed = previous === undefined ? observed : (previous + observed) / 2;
  db.prepare(
    `INSERT INTO upload_speeds (bucket_id, bytes_per_second, observed_at) VALUES (?, ?, ?)
     ON CONFLICT (bucket_id) DO UPDATE SET bytes_per_second = excluded.bytes_per_second,
       observed_at = excluded.observed_at`,
  ).run(bucketId, speed, now);
}
