import {
  countAddition,
  countCopiedAdditions,
  prepareCopiedAdditions,
  uncountAdditions,
} from './block-refs.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';

// The block sets of live (pending, active, outdated) versions (§11.6), stored as deltas: a
// version's version_blocks rows say what it adds to (removed = 0) or removes from (removed = 1)
// the set of its `set_base`, and a version without a base holds its whole set as additions.
// A push writes only the parent's removed blocks, and a shard only its new blocks, instead of
// copying the whole set: 100 000 rows (11 MB) per version of 100 000 small files.
//
// Invariants, which every function here keeps:
// - A base is live and its set never changes: a push builds on the active version, and only
//   pending versions' sets change. So the rows of a version with a base describe its set
//   exactly relative to the base's: an addition is not in the base's set, a removal is.
// - A version's chain (itself, its base, its base's base, …) ends at a version without a base
//   within MAX_SET_DEPTH steps; the push that would go deeper copies the whole set instead.
// - user_blocks counts additions (block-refs.ts). A version leaving the live states hands its
//   rows on to the versions built on it (rebase) before its own are dropped.
// Every function runs inside the caller's transaction, which is also the GC's lock.

/**
 * The longest chain: lookups walk it, one index probe per version, and every MAX_SET_DEPTH-th
 * version of a line copies its whole set. 16 keeps a lookup within 17 probes while the copies
 * cost a sixteenth of what copying every version did.
 */
const MAX_SET_DEPTH = 16;

interface SetRow {
  set_base: string | null;
  set_depth: number;
  set_bytes: number;
}

function setRowOf(db: Db, versionId: string): SetRow {
  const row = sql<[string], SetRow>(
    db,
    'SELECT set_base, set_depth, set_bytes FROM versions WHERE id = ?',
  ).get(versionId);
  if (!row) throw new Error(`version ${versionId} vanished`);
  return row;
}

/** The versions whose rows make up a version's set, nearest first, as a JSON array. */
export function chainOf(db: Db, versionId: string): string {
  const chain = [versionId];
  for (let base = setRowOf(db, versionId).set_base; base !== null;) {
    chain.push(base);
    if (chain.length > MAX_SET_DEPTH + 1) throw new Error(`the block set of ${versionId} loops`);
    base = setRowOf(db, base).set_base;
  }
  return JSON.stringify(chain);
}

/**
 * The SQL of whether the set of a chain (chainOf, bound at `chainParam`) holds the block that
 * `cid` names: the nearest row of the chain decides. json_each numbers the chain in `key`.
 */
export function chainHolds(chainParam: string, cid: string): string {
  return `COALESCE((SELECT vb.removed FROM json_each(${chainParam}) AS chain
    JOIN version_blocks AS vb ON vb.version_id = chain.value AND vb.cid = ${cid}
    ORDER BY chain.key LIMIT 1), 1) = 0`;
}

function addBytes(db: Db, versionId: string, bytes: number): void {
  sql(db, 'UPDATE versions SET set_bytes = set_bytes + ? WHERE id = ?').run(bytes, versionId);
}

/**
 * A new version's set starts as its parent's minus `deleted` (§11.6): rows for the removals
 * alone, or, once the chain is MAX_SET_DEPTH long, a copy of the whole set (in SQL, not row by
 * row: 100 000 rows took two seconds and 12 MB of heap through JavaScript).
 */
export function inheritBlockSet(
  db: Db,
  versionId: string,
  userId: string,
  parentId: string | null,
  deleted: ReadonlySet<string>,
): void {
  if (parentId === null) return;
  const parent = setRowOf(db, parentId);
  const chain = chainOf(db, parentId);
  const deletedJson = JSON.stringify([...deleted]);
  if (parent.set_depth + 1 > MAX_SET_DEPTH) {
    copyWholeSet(db, versionId, userId, chain, deletedJson);
    return;
  }
  const removed = sql<[string, string, string], { cid: string; size: number | null }>(
    db,
    `INSERT INTO version_blocks (version_id, cid, removed)
     SELECT ?, deleted.value, 1 FROM json_each(?) AS deleted
     WHERE ${chainHolds('?', 'deleted.value')}
     RETURNING cid, (SELECT size FROM blocks WHERE blocks.cid = version_blocks.cid) AS size`,
  ).all(versionId, deletedJson, chain);
  const removedBytes = removed.reduce((sum, row) => sum + (row.size ?? 0), 0);
  sql(db, 'UPDATE versions SET set_base = ?, set_depth = ?, set_bytes = ? WHERE id = ?').run(
    parentId,
    parent.set_depth + 1,
    parent.set_bytes - removedBytes,
    versionId,
  );
}

/** Writes the whole set of `chain` minus `deletedJson` as the additions of a version. */
function copyWholeSet(
  db: Db,
  versionId: string,
  userId: string,
  chain: string,
  deletedJson: string,
): void {
  prepareCopiedAdditions(db);
  sql(
    db,
    `INSERT INTO temp.copied_additions (cid)
     SELECT cid FROM (
       SELECT vb.cid AS cid, vb.removed AS removed,
         ROW_NUMBER() OVER (PARTITION BY vb.cid ORDER BY chain.key) AS nearest
       FROM json_each(?) AS chain JOIN version_blocks AS vb ON vb.version_id = chain.value)
     WHERE nearest = 1 AND removed = 0 AND cid NOT IN (SELECT value FROM json_each(?))`,
  ).run(chain, deletedJson);
  sql(
    db,
    `INSERT INTO version_blocks (version_id, cid, removed)
     SELECT ?, cid, 0 FROM temp.copied_additions`,
  ).run(versionId);
  for (const cid of countCopiedAdditions(db, userId)) countAddition(db, userId, cid);
  const bytes = sql<[string], number>(
    db,
    `SELECT COALESCE(SUM(b.size), 0) FROM version_blocks vb JOIN blocks b ON b.cid = vb.cid
     WHERE vb.version_id = ?`,
  )
    .pluck()
    .get(versionId);
  sql(db, 'UPDATE versions SET set_base = NULL, set_depth = 0, set_bytes = ? WHERE id = ?').run(
    bytes ?? 0,
    versionId,
  );
}

/** CIDs looked up per statement by takeHeldIntoSet. */
const HELD_LOOKUP_BATCH = 500;

/**
 * Which of `cids` user `userId` holds join the set of pending version `versionId`, so the
 * client may skip them (§11.3). Returns the others, in order, each once: the missing ones.
 *
 * In a few statements per 500 CIDs, over them all at once: block by block (seven statements
 * each), the 100 000 blocks of a first backup into a second bucket of the same files took
 * 4.2 s of the server's one thread, against 2.5 s this way (CPU profiles of the embedded
 * service, the commits of the requests' transactions aside), most of it the rows each block
 * adds.
 */
export function takeHeldIntoSet(
  db: Db,
  versionId: string,
  userId: string,
  cids: readonly string[],
): string[] {
  const chain = chainOf(db, versionId);
  const asked = [...new Set(cids)];
  // Looked up in CID order, the order of the indexes, as findHeldBlocks does. CROSS JOIN keeps
  // the CIDs asked the outer loop: left to itself, SQLite walked all the user's blocks and
  // scanned the CIDs for each, and a backup of 100 000 held blocks ran for minutes.
  const inOrder = [...asked].sort();
  const lookup = sql<
    [{ batch: string; user: string; chain: string }],
    { cid: string; in_set: number; size: number | null }
  >(
    db,
    `SELECT asked.value AS cid, ${chainHolds('@chain', 'asked.value')} AS in_set,
       (SELECT size FROM blocks WHERE blocks.cid = asked.value) AS size
     FROM json_each(@batch) AS asked
     CROSS JOIN user_blocks u ON u.user_id = @user AND u.cid = asked.value AND u.refs > 0`,
  );
  const held = new Set<string>();
  let addedBytes = 0;
  for (let at = 0; at < inOrder.length; at += HELD_LOOKUP_BATCH) {
    const batch = JSON.stringify(inOrder.slice(at, at + HELD_LOOKUP_BATCH));
    const adds: string[] = [];
    for (const row of lookup.all({ batch, user: userId, chain })) {
      held.add(row.cid);
      if (row.in_set === 1) continue;
      adds.push(row.cid);
      // A block the store lost while held adds nothing to the set's bytes, as it holds none.
      addedBytes += row.size ?? 0;
    }
    if (adds.length > 0) addHeldToSet(db, versionId, userId, adds);
  }
  if (addedBytes > 0) addBytes(db, versionId, addedBytes);
  return asked.filter((cid) => !held.has(cid));
}

/** Adds blocks the user holds, none of them in the version's set, to that set. */
function addHeldToSet(db: Db, versionId: string, userId: string, cids: readonly string[]): void {
  // Removed by this version's own row: dropping the row puts it back, as its base holds it.
  const undone = new Set(
    sql<[string, string], string>(
      db,
      `DELETE FROM version_blocks WHERE version_id = ? AND removed = 1
         AND cid IN (SELECT value FROM json_each(?)) RETURNING cid`,
    )
      .pluck()
      .all(versionId, JSON.stringify(cids)),
  );
  const added = undone.size === 0 ? cids : cids.filter((cid) => !undone.has(cid));
  if (added.length === 0) return;
  const addedJson = JSON.stringify(added);
  sql(
    db,
    `INSERT INTO version_blocks (version_id, cid, removed)
     SELECT ?, value, 0 FROM json_each(?)`,
  ).run(versionId, addedJson);
  // One more adding row for each: the lookup found each held (refs > 0) in this transaction.
  const counted = sql(
    db,
    `UPDATE user_blocks SET refs = refs + 1
     WHERE user_id = ? AND refs > 0 AND cid IN (SELECT value FROM json_each(?))`,
  ).run(userId, addedJson).changes;
  // A count that went astray would let a block of this set be collected: the request fails,
  // and its transaction is rolled back, rather than store that.
  if (counted !== added.length)
    throw new Error(`counted ${counted} of the ${added.length} held blocks added to a set`);
}

/**
 * Drops a version's set when it leaves the live states (deleted, upload_failed). The versions
 * built on it are rebased first, onto its own base. Deleting a line newest first rebases none.
 */
export function releaseBlockSet(db: Db, versionId: string, userId: string): void {
  const dependents = sql<[string], string>(
    db,
    `SELECT id FROM versions WHERE set_base = ? AND state IN ('pending', 'active', 'outdated')`,
  )
    .pluck()
    .all(versionId);
  for (const dependent of dependents) rebase(db, dependent, versionId, userId);
  const additions = sql<[string], string>(
    db,
    'SELECT cid FROM version_blocks WHERE version_id = ? AND removed = 0',
  )
    .pluck()
    .all(versionId);
  uncountAdditions(db, userId, additions);
  sql(db, 'DELETE FROM version_blocks WHERE version_id = ?').run(versionId);
  sql(db, 'UPDATE versions SET set_base = NULL, set_depth = 0 WHERE id = ?').run(versionId);
}

/**
 * Makes `child`'s rows say the same set relative to `base`'s own base, so that `base` can go.
 * A block both name cancels out: added by the base and removed by the child, it is in neither
 * set; removed by the base and added back by the child, it is in both. Every other row of the
 * base is copied. The child's set, and so its bytes, stay as they were.
 */
function rebase(db: Db, child: string, base: string, userId: string): void {
  const cancelled = sql<[string, string], { cid: string; removed: number }>(
    db,
    `DELETE FROM version_blocks AS own WHERE version_id = ? AND EXISTS (
       SELECT 1 FROM version_blocks AS theirs WHERE theirs.version_id = ? AND theirs.cid = own.cid)
     RETURNING cid, removed`,
  ).all(child, base);
  prepareCopiedAdditions(db);
  // The cancelled blocks are not in the child's rows any more: copy those rows of the base's
  // that the child did not name.
  const cancelledJson = JSON.stringify(cancelled.map((row) => row.cid));
  sql(
    db,
    `INSERT INTO temp.copied_additions (cid)
     SELECT cid FROM version_blocks WHERE version_id = ? AND removed = 0
       AND cid NOT IN (SELECT value FROM json_each(?))`,
  ).run(base, cancelledJson);
  sql(
    db,
    `INSERT INTO version_blocks (version_id, cid, removed)
     SELECT ?, cid, removed FROM version_blocks WHERE version_id = ?
       AND cid NOT IN (SELECT value FROM json_each(?))`,
  ).run(child, base, cancelledJson);
  for (const cid of countCopiedAdditions(db, userId)) countAddition(db, userId, cid);
  uncountAdditions(
    db,
    userId,
    cancelled.filter((row) => row.removed === 0).map((row) => row.cid),
  );
  const baseRow = setRowOf(db, base);
  sql(db, 'UPDATE versions SET set_base = ?, set_depth = ? WHERE id = ?').run(
    baseRow.set_base,
    baseRow.set_depth,
    child,
  );
}

/** Held for the user: in the set of one of their pending, active or outdated versions. */
export function isHeldByUser(db: Db, userId: string, cid: string): boolean {
  return (
    sql(db, 'SELECT 1 FROM user_blocks WHERE user_id = ? AND cid = ? AND refs > 0').get(
      userId,
      cid,
    ) !== undefined
  );
}

export function blockSetBytes(db: Db, versionId: string): number {
  return setRowOf(db, versionId).set_bytes;
}

/**
 * Whether the host stores every block of the version's set. It looks at every addition of the
 * chain, which covers the set: a block one of them adds is held by the user, so never
 * collected, and is only missing here if the store lost it.
 */
export function blockSetIsStored(db: Db, versionId: string): boolean {
  const missing = sql<[string], number>(
    db,
    `SELECT EXISTS (SELECT 1 FROM json_each(?) AS chain
       JOIN version_blocks vb ON vb.version_id = chain.value AND vb.removed = 0
       WHERE NOT EXISTS (SELECT 1 FROM blocks b WHERE b.cid = vb.cid))`,
  )
    .pluck()
    .get(chainOf(db, versionId));
  return missing === 0;
}
