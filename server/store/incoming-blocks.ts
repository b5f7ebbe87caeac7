import { randomUUID } from 'node:crypto';
import type { Statement } from 'better-sqlite3';
import { chainHolds, chainOf } from './block-sets.ts';
import { findBlock, pinStoredAmong, unpinUpload, type BlockLocation } from './stored-blocks.ts';
import type { Db } from './database.ts';

// The blocks of one shard as it streams in (§11.2), kept in temporary tables of the server's
// connection rather than in memory, and committed in a handful of statements over the whole
// set rather than several per block.
//
// A shard may be 256 MiB of the smallest blocks there are: a million blocks of 8 bytes are
// 43 MiB. Held in a Map and committed block by block (seven statements each), such a shard
// took 18.6 s and the server's peak memory to 418 MB, and three million would have taken over
// a gigabyte. Here the blocks lie in SQLite's temporary file (in TMPDIR; where that is a
// tmpfs, in memory after all, though not the server's): 12.4 s and 232-281 MB for a million,
// 268 MB for three million (`npm run bench -- server`). They are appended as they arrive, a
// batch per transaction (a first try, inserting each into a table keyed by CID in a
// transaction of its own, spent 8.6 s on a million), then copied once in CID order into a
// table keyed by CID, the order of every index the commit walks. The statements do
// the bookkeeping of block-sets.ts and block-refs.ts for every block at once.
//
// The commit is still one transaction, as a shard is stored whole or not at all, and the
// server has one thread: other requests wait for it, 7.7 s for a million blocks, 30 s for three
// million (18.6 s and 11.5 s before). Clients of this project send at most 32 768 blocks a
// shard (main/uploader/shard-target.ts), whose commit takes a fraction of a second.
//
// Each upload has tables of its own, dropped when it ends; its statements are prepared for it
// and not cached. The stored blocks it names are pinned in the database (pinStoredAmong), where
// every process serving the folder sees them, until it ends.

let lastUpload = 0;

export class IncomingBlocks {
  private readonly arrivals: string;
  private readonly blocks: string;
  private readonly append: Statement<[string, number, number | null]>;
  /** Names this upload's pins. */
  private readonly upload = randomUUID();
  private pinned = false;
  private settled = false;

  constructor(private readonly db: Db) {
    const upload = ++lastUpload;
    this.arrivals = `temp.shard_${upload}_arrivals`;
    this.blocks = `temp.shard_${upload}_blocks`;
    db.exec(
      `CREATE TEMP TABLE shard_${upload}_arrivals (
         cid TEXT NOT NULL, size INTEGER NOT NULL,
         -- Where this upload's pack holds it; NULL when the host held it already on arrival.
         pack_offset INTEGER);
       CREATE TEMP TABLE shard_${upload}_blocks (
         cid TEXT PRIMARY KEY, size INTEGER NOT NULL, pack_offset INTEGER,
         -- Set while committing: not yet in the version's set; not yet held by the user.
         new_to_set INTEGER NOT NULL DEFAULT 0, new_to_user INTEGER NOT NULL DEFAULT 0
       ) WITHOUT ROWID;`,
    );
    this.append = db.prepare(
      `INSERT INTO ${this.arrivals} (cid, size, pack_offset) VALUES (?, ?, ?)`,
    );
  }

  /**
   * Records `record`'s blocks in one transaction of the temporary tables alone: each call of
   * its `add` a block of the shard, with where the pack holds it (null: the host held it on
   * arrival). A block the shard names twice is kept once (settle).
   */
  batch(record: (add: (cid: string, size: number, packOffset: number | null) => void) => void) {
    this.db.transaction(() => {
      record((cid, size, packOffset) => this.append.run(cid, size, packOffset));
    })();
  }

  /**
   * Which of `cids` the host stores, each kept from garbage collection until this upload ends:
   * the shard does not write them again.
   */
  pinStored(cids: readonly string[]): Set<string> {
    this.pinned = true;
    return pinStoredAmong(this.db, this.upload, cids);
  }

  /** Puts the blocks in CID order, each once; returns how many there are, and their bytes. */
  settle(): { count: number; bytes: number } {
    if (!this.settled) {
      // A block held on arrival and collected before it arrived again has a copy in the pack:
      // that one is kept (NULLs sort last in descending order).
      this.db
        .prepare(
          `INSERT OR IGNORE INTO ${this.blocks} (cid, size, pack_offset)
           SELECT cid, size, pack_offset FROM ${this.arrivals}
           ORDER BY cid, pack_offset DESC`,
        )
        .run();
      this.db.exec(`DELETE FROM ${this.arrivals}`);
      this.settled = true;
    }
    const row = this.db
      .prepare<[], { count: number; bytes: number }>(
        `SELECT COUNT(*) AS count, COALESCE(SUM(size), 0) AS bytes FROM ${this.blocks}`,
      )
      .get();
    return { count: row?.count ?? 0, bytes: row?.bytes ?? 0 };
  }

  /**
   * Marks the blocks version `versionId` does not hold yet, and returns their bytes: what the
   * shard adds to the version's received total. Call within the committing transaction.
   * new_to_set is 2 for a block the version's own row removed from its base's set, 1 for the
   * others. A block the user holds in no set is in none of this version's, without a walk.
   */
  markNewToSet(versionId: string): number {
    this.db
      .prepare(
        `UPDATE ${this.blocks} SET new_to_set = 1 WHERE NOT EXISTS (SELECT 1 FROM user_blocks
           WHERE user_id = (SELECT user_id FROM versions WHERE id = @version)
             AND user_blocks.cid = ${this.table}.cid AND refs > 0)
           OR NOT ${chainHolds('@chain', `${this.table}.cid`)}`,
      )
      .run({ chain: chainOf(this.db, versionId), version: versionId });
    this.db
      .prepare(
        `UPDATE ${this.blocks} SET new_to_set = 2 WHERE new_to_set = 1 AND EXISTS (
           SELECT 1 FROM version_blocks WHERE version_id = ? AND removed = 1
             AND version_blocks.cid = ${this.table}.cid)`,
      )
      .run(versionId);
    const row = this.db
      .prepare<[], { bytes: number }>(
        `SELECT COALESCE(SUM(size), 0) AS bytes FROM ${this.blocks} WHERE new_to_set <> 0`,
      )
      .get();
    return row?.bytes ?? 0;
  }

  /** Whether a block the host held on arrival has been collected since. */
  anyCollected(): boolean {
    return (
      this.db
        .prepare(
          `SELECT 1 FROM ${this.blocks} WHERE pack_offset IS NULL AND NOT EXISTS
             (SELECT 1 FROM blocks WHERE blocks.cid = ${this.table}.cid) LIMIT 1`,
        )
        .get() !== undefined
    );
  }

  /**
   * Stores the blocks no upload stored meanwhile as held in pack `packId`, and returns their
   * bytes; those another upload stored first stay dead bytes in the pack. Call after
   * markNewToSet and before addToBlockSet; `userId` is the uploading user.
   */
  storeInPack(packId: string, userId: string): number {
    const unstored = `FROM ${this.blocks} WHERE pack_offset IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM blocks WHERE blocks.cid = ${this.table}.cid)`;
    const row = this.db
      .prepare<[], { bytes: number }>(`SELECT COALESCE(SUM(size), 0) AS bytes ${unstored}`)
      .get();
    // A block the uploading user holds (in this version's set, or another's), yet the store
    // lacks, was lost from the store while held: its holders are those who hold it, not none,
    // or it would be collected again. Only such blocks are counted, one by one. Asked of this
    // user only, by the key of user_blocks: whether any user holds a block would scan the table
    // for each block of the shard (17 ms a block with 100 000 held), as it has no index by CID.
    const lost = this.db
      .prepare<[string], string>(
        `SELECT cid ${unstored} AND (new_to_set <> 1 OR EXISTS (SELECT 1 FROM user_blocks
           WHERE user_id = ? AND user_blocks.cid = ${this.table}.cid AND refs <> 0))`,
      )
      .pluck()
      .all(userId);
    this.db
      .prepare(
        `INSERT INTO blocks (cid, size, holders, pack, pack_offset)
         SELECT cid, size, 0, ?, pack_offset ${unstored}`,
      )
      .run(packId);
    const countHolders = this.db.prepare<[string]>(
      `UPDATE blocks SET holders = (SELECT COUNT(*) FROM user_blocks
         WHERE user_blocks.cid = blocks.cid AND refs <> 0) WHERE cid = ?`,
    );
    for (const cid of lost) countHolders.run(cid);
    return row?.bytes ?? 0;
  }

  /**
   * Points each of `cids`, a block the host stored already whose stored copy was found damaged
   * (damaged-copies.ts), at its copy in pack `packId`; returns those bytes and the copies they
   * replace, for the caller to release. A block collected meanwhile was stored anew by
   * storeInPack instead.
   */
  replaceStored(
    packId: string,
    cids: ReadonlySet<string>,
  ): { bytes: number; replaced: BlockLocation[] } {
    const arrivedCopy = this.db.prepare<[string], { size: number; pack_offset: number }>(
      `SELECT size, pack_offset FROM ${this.blocks} WHERE cid = ? AND pack_offset IS NOT NULL`,
    );
    const point = this.db.prepare<[string, number, string]>(
      'UPDATE blocks SET pack = ?, pack_offset = ? WHERE cid = ?',
    );
    let bytes = 0;
    const replaced: BlockLocation[] = [];
    for (const cid of cids) {
      const copy = arrivedCopy.get(cid);
      const old = findBlock(this.db, cid);
      if (!copy || !old || old.pack === packId) continue;
      point.run(packId, copy.pack_offset, cid);
      bytes += copy.size;
      replaced.push(old);
    }
    return { bytes, replaced };
  }

  /**
   * Adds the blocks marked by markNewToSet to the version's set, each stored already: a row
   * of the version that removed one from its base's set goes; for the others an adding row
   * with its bookkeeping (block-refs.ts): the user's count of adding rows, and, for a block
   * the user did not hold, its holders and the user's stored bytes.
   */
  addToBlockSet(versionId: string, userId: string): void {
    const { db } = this;
    db.prepare(
      `DELETE FROM version_blocks WHERE version_id = ? AND removed = 1
         AND cid IN (SELECT cid FROM ${this.blocks} WHERE new_to_set = 2)`,
    ).run(versionId);
    db.prepare(
      `UPDATE ${this.blocks} SET new_to_user = 1 WHERE new_to_set = 1 AND NOT EXISTS
         (SELECT 1 FROM user_blocks WHERE user_id = ? AND user_blocks.cid = ${this.table}.cid
          AND refs <> 0)`,
    ).run(userId);
    db.prepare(
      `INSERT INTO version_blocks (version_id, cid, removed)
       SELECT ?, cid, 0 FROM ${this.blocks} WHERE new_to_set = 1`,
    ).run(versionId);
    db.prepare(
      `INSERT INTO user_blocks (user_id, cid, refs)
       SELECT ?, cid, 1 FROM ${this.blocks} WHERE new_to_set = 1
       ON CONFLICT (user_id, cid) DO UPDATE SET refs = refs + 1`,
    ).run(userId);
    db.prepare(
      `UPDATE blocks SET holders = holders + 1
       WHERE cid IN (SELECT cid FROM ${this.blocks} WHERE new_to_user = 1)`,
    ).run();
    db.prepare(
      `UPDATE users SET data_bytes = data_bytes +
         (SELECT COALESCE(SUM(size), 0) FROM ${this.blocks} WHERE new_to_user = 1)
       WHERE id = ?`,
    ).run(userId);
    db.prepare(
      `UPDATE versions SET set_bytes = set_bytes +
         (SELECT COALESCE(SUM(size), 0) FROM ${this.blocks} WHERE new_to_set <> 0)
       WHERE id = ?`,
    ).run(versionId);
  }

  /** Drops this upload's tables and pins. */
  drop(): void {
    this.db.exec(`DROP TABLE IF EXISTS ${this.arrivals}; DROP TABLE IF EXISTS ${this.blocks};`);
    if (this.pinned) unpinUpload(this.db, this.upload);
  }

  /** The keyed table's name without its schema, as correlated subqueries name it. */
  private get table(): string {
    return this.blocks.slice('temp.'.length);
  }
}
