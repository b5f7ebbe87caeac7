import { isDiskFull } from '../api/index.ts';
import type { StateDb } from './database.ts';

// The state database gives back to the disk the room a deleted bucket's records took. SQLite
// keeps the pages rows are deleted from, for the rows that come next: a backup's passing rows
// (the file index it stages, the blocks it plans) use them again, but those of a bucket gone
// never come back. Deleting a bucket of 300 000 files left ~/.canopy/state.sqlite at 224 MB,
// all but 0.2 MB of it free pages, for good.
//
// VACUUM rewrites the database without them. It writes what the other buckets' records hold
// (about 30 MB per 100 000 files), so it runs only when the free pages are a large share of the
// file, and it waits little for another Canopy process writing: the room is then given back
// after the next bucket deleted, or never, which costs disk space and nothing else.

/** Free pages past this share of the file are given back. */
const FREE_SHARE_GIVEN_BACK = 0.25;
/** How long the rewrite waits for another process's write to the database. */
const BUSY_WAIT_MS = 1000;

/** What releaseFreeSpace did. */
export type FreeSpaceRelease =
  | 'released'
  /** Too few free pages to be worth a rewrite. */
  | 'not needed'
  /** Another process was writing, or the disk lacked room for the rewrite. */
  | 'not now';

/** Rewrites `db` without its free pages, when they are a large share of it. */
export function releaseFreeSpace(db: StateDb): FreeSpaceRelease {
  const pages = Number(db.pragma('page_count', { simple: true }));
  const free = Number(db.pragma('freelist_count', { simple: true }));
  if (free === 0 || free < pages * FREE_SHARE_GIVEN_BACK) return 'not needed';
  const busyTimeout = Number(db.pragma('busy_timeout', { simple: true }));
  db.pragma(`busy_timeout = ${BUSY_WAIT_MS}`);
  try {
    db.exec('VACUUM');
    // In WAL mode the rewritten pages are in the log: the file shrinks once they are copied
    // back. A reader of another process may hold that back; its next checkpoint does it then.
    db.pragma('wal_checkpoint(TRUNCATE)');
    return 'released';
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY' || isDiskFull(error)) return 'not now';
    throw error;
  } finally {
    db.pragma(`busy_timeout = ${busyTimeout}`);
  }
}
