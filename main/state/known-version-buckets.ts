import { bucketIdsKept, readBucket, versionIdsKeptOf } from './account-state.ts';
import type { StateDb } from './database.ts';

// Which bucket a version belongs to, as this device's records tell: a version is made in one
// bucket and stays one of its versions, so a version this device knows as another bucket's is
// not this one's, whatever the local metadata cache holds of it. Buckets are told by id, since
// a name changes (`canopy buckets rename`) and the records of what was seen keep the name of
// the time.

/** A bucket as this device knows it: its id, and its name as last seen. */
export interface KnownBucket {
  readonly id: string;
  readonly name: string;
}

/** The name bucket `id` had when this device last saw it. */
function lastNameOf(db: StateDb, id: string): string {
  return (
    readBucket(db, id)?.name ??
    db
      .prepare<{ id: string }, string>(
        `SELECT bucket_name FROM (
           SELECT bucket_name, seen_at FROM known_versions WHERE bucket_id = @id
           UNION ALL
           SELECT bucket_name, seen_at FROM known_active_versions WHERE bucket_id = @id)
         ORDER BY seen_at DESC LIMIT 1`,
      )
      .pluck()
      .get({ id }) ??
    id
  );
}

/** The buckets whose versions this device's records name `versionId` among (versionIdsKeptOf). */
export function bucketsKnownToHoldVersion(db: StateDb, versionId: string): KnownBucket[] {
  return bucketIdsKept(db)
    .filter((id) => versionIdsKeptOf(db, id).has(versionId))
    .map((id) => ({ id, name: lastNameOf(db, id) }));
}

/** The ids of the buckets named `name` in this device's records, as last seen. */
export function bucketIdsNamed(db: StateDb, name: string): string[] {
  return db
    .prepare<{ name: string }, string>(
      `SELECT id FROM buckets WHERE name = @name
       UNION SELECT bucket_id FROM known_versions WHERE bucket_name = @name
       UNION SELECT bucket_id FROM known_active_versions WHERE bucket_name = @name`,
    )
    .pluck()
    .all({ name });
}

/**
 * Bucket `id` is named `name` from now on, in every record that names it: browsing it by its
 * new name while the service cannot be reached finds what was seen under the old one.
 */
export function renameKnownBucket(db: StateDb, id: string, name: string): void {
  db.transaction(() => {
    db.prepare('UPDATE buckets SET name = ? WHERE id = ?').run(name, id);
    for (const table of ['known_versions', 'known_active_versions'])
      db.prepare(`UPDATE ${table} SET bucket_name = ? WHERE bucket_id = ?`).run(name, id);
  }).immediate();
}
