import type { StateDb } from './database.ts';

// The retention policy set for a bucket on this device (270-create-retention-policies.sql), kept
// as the engine's JSON: what it means is the engine's (main/engine/retention-policy.ts).

/** The policy kept for bucket `bucketId`, as its JSON text; undefined when none is set. */
export function retentionPolicyTextOf(db: StateDb, bucketId: string): string | undefined {
  return db
    .prepare<[string], string>('SELECT policy FROM retention_policies WHERE bucket_id = ?')
    .pluck()
    .get(bucketId);
}

/** Keeps `policy` (JSON text) for bucket `bucketId`, replacing any; null forgets it. */
export function keepRetentionPolicy(db: StateDb, bucketId: string, policy: string | null): void {
  if (policy === null) {
    db.prepare('DELETE FROM retention_policies WHERE bucket_id = ?').run(bucketId);
    return;
  }
  db.prepare(
    `INSERT INTO retention_policies (bucket_id, policy) VALUES (?, ?)
     ON CONFLICT (bucket_id) DO UPDATE SET policy = excluded.policy`,
  ).run(bucketId, policy);
}
