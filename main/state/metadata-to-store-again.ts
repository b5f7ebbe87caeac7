import type { StateDb } from './database.ts';

// The bucket whose active version's metadata the next backup stores again
// (210-record-metadata-to-store-again.sql).

/** Notes that version `versionId`, active in bucket `bucketId`, has damaged metadata. */
export function noteMetadataToStoreAgain(
  db: StateDb,
  bucketId: string,
  versionId: string,
  now: number,
): void {
  db.prepare<[string, string, number]>(
    `INSERT INTO metadata_to_store_again (bucket_id, version_id, found_at) VALUES (?, ?, ?)
     ON CONFLICT (bucket_id) DO UPDATE SET version_id = excluded.version_id,
       found_at = excluded.found_at`,
  ).run(bucketId, versionId, now);
}

/** The version of bucket `bucketId` whose metadata the next backup stores again, if any. */
export function metadataToStoreAgain(db: StateDb, bucketId: string): string | undefined {
  return db
    .prepare<[string], string>('SELECT version_id FROM metadata_to_store_again WHERE bucket_id = ?')
    .pluck()
    .get(bucketId);
}

export function forgetMetadataToStoreAgain(db: StateDb, bucketId: string): void {
  db.prepare<[string]>('DELETE FROM metadata_to_store_again WHERE bucket_id = ?').run(bucketId);
}
