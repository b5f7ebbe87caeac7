import type { StateDb } from './database.ts';

// Each bucket's active version as last seen, for browsing while offline.

export interface KnownActiveVersion {
  readonly bucket_id: string;
  readonly bucket_name: string;
  readonly version_id: string;
  readonly seen_at: number;
}

export function rememberActiveVersion(db: StateDb, record: KnownActiveVersion): void {
  db.prepare(
    `INSERT INTO known_active_versions (bucket_id, bucket_name, version_id, seen_at)
     VALUES (@bucket_id, @bucket_name, @version_id, @seen_at)
     ON CONFLICT (bucket_id) DO UPDATE SET bucket_name = excluded.bucket_name,
       version_id = excluded.version_id, seen_at = excluded.seen_at`,
  ).run(record);
}

/** Forgets the bucket's active version: it has none any more, or is gone. */
export function forgetActiveVersion(db: StateDb, bucketId: string): void {
  db.prepare('DELETE FROM known_active_versions WHERE bucket_id = ?').run(bucketId);
}

/** The most recently seen active version of the bucket named `name`. */
export function lastKnownActiveVersion(db: StateDb, name: string): KnownActiveVersion | undefined {
  return db
    .prepare<[string], KnownActiveVersion>(
      'SELECT * FROM known_active_versions WHERE bucket_name = ? ORDER BY seen_at DESC LIMIT 1',
    )
    .get(name);
}

/** The active version of every bucket, as last seen. */
export function knownActiveVersionIds(db: StateDb): string[] {
  return db.prepare<[], string>('SELECT version_id FROM known_active_versions').pluck().all();
}
