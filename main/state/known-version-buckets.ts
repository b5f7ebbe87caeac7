import type { StateDb } from './database.ts';

// Which bucket a version belongs to, as this device last saw: a version is made in one bucket
// and stays one of its versions, so a version seen in another bucket's lists is not this one's,
// whatever the local metadata cache holds of it.

/**
 * The names of the buckets whose versions, as last listed, or whose active version, as last
 * seen, include `versionId`; empty when this device never saw it in any.
 */
export function bucketsKnownToHoldVersion(db: StateDb, versionId: string): string[] {
  return db
    .prepare<[string, string], string>(
      `SELECT bucket_name FROM known_versions
         WHERE EXISTS (SELECT 1 FROM json_each(versions_json)
                         WHERE json_extract(json_each.value, '$.id') = ?)
       UNION
       SELECT bucket_name FROM known_active_versions WHERE version_id = ?`,
    )
    .pluck()
    .all(versionId, versionId);
}
