import type { StateDb } from './database.ts';

// Each bucket's list of versions as last seen, for listing them while offline.

export interface KnownVersions {
  readonly bucket_id: string;
  readonly bucket_name: string;
  /** The service's list, as JSON. */
  readonly versions_json: string;
  readonly seen_at: number;
}

export function rememberVersions(db: StateDb, record: KnownVersions): void {
  db.prepare(
    `INSERT INTO known_versions (bucket_id, bucket_name, versions_json, seen_at)
     VALUES (@bucket_id, @bucket_name, @versions_json, @seen_at)
     ON CONFLICT (bucket_id) DO UPDATE SET bucket_name = excluded.bucket_name,
       versions_json = excluded.versions_json, seen_at = excluded.seen_at`,
  ).run(record);
}

/** The most recently seen list of versions of the bucket named `name`. */
export function lastKnownVersions(db: StateDb, name: string): KnownVersions | undefined {
  return db
    .prepare<[string], KnownVersions>(
      'SELECT * FROM known_versions WHERE bucket_name = ? ORDER BY seen_at DESC LIMIT 1',
    )
    .get(name);
}
