import type { StateDb } from './database.ts';

// The blocks each bucket's next backup sends again (200-record-blocks-to-resend.sql): a restore
// or a verify found the host could not give them back whole.

/** Notes `cids` of bucket `bucketId` to be sent again; a CID noted already stays as it was. */
export function noteBlocksToResend(
  db: StateDb,
  bucketId: string,
  cids: Iterable<string>,
  now: number,
): void {
  const note = db.prepare<[string, string, number]>(
    'INSERT OR IGNORE INTO blocks_to_resend (bucket_id, cid, found_at) VALUES (?, ?, ?)',
  );
  db.transaction(() => {
    for (const cid of cids) note.run(bucketId, cid, now);
  }).immediate();
}

/** The blocks bucket `bucketId`'s next backup sends again, by CID text. */
export function blocksToResend(db: StateDb, bucketId: string): Set<string> {
  return new Set(
    db
      .prepare<[string], string>('SELECT cid FROM blocks_to_resend WHERE bucket_id = ?')
      .pluck()
      .all(bucketId),
  );
}

/** Drops `cids` of bucket `bucketId`: sent again, or no longer in its source. */
export function forgetBlocksToResend(db: StateDb, bucketId: string, cids: Iterable<string>): void {
  const forget = db.prepare<[string, string]>(
    'DELETE FROM blocks_to_resend WHERE bucket_id = ? AND cid = ?',
  );
  db.transaction(() => {
    for (const cid of cids) forget.run(bucketId, cid);
  }).immediate();
}
