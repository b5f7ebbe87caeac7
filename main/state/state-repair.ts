import { existsSync, renameSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import { EngineError, type StateLoss, type StateRepair } from '../api/index.ts';
import { openStateDatabase, type StateDb } from './database.ts';
import { clearDamageMark, isDamageError, isMarkedDamaged } from './state-damage.ts';

// Rebuilding a damaged state database from what is intact in it. A damaged page loses the rows
// on it, not the database: the account, the exclude rules and the retention policies are a few
// rows on pages of their own, and most damage falls on the file index, by far the largest table. So a new database is
// made, and each group of tables that only make sense together is copied from the damaged one
// whole or not at all; a group that cannot be read is left out, and named to the user when it
// is more than a cache. The damaged file is kept beside the new one.
//
// The rebuild is made as `<file>.rebuilding`, and only then is the damaged file set aside and
// the rebuilt one put in its place, so a crash at any point leaves a database to open: the
// damaged one (rebuilt again, as it is still marked), or the rebuilt one.

/** Tables that hold together (foreign keys, or rows that refer to each other), parents first. */
interface TableGroup {
  readonly tables: readonly string[];
  /** What the user loses with it; none for a cache. */
  readonly loss?: StateLoss;
}

const GROUPS: readonly TableGroup[] = [
  // The buckets come back from the service with the next request; the home's id only names
  // keychain entries made from now on: each stands alone, as a cache does.
  { tables: ['account'], loss: 'account' },
  {
    tables: ['file_index_sources', 'file_index', 'file_index_stages', 'file_index_staged'],
    loss: 'file_index',
  },
  {
    tables: [
      'uploads',
      'upload_shards',
      'upload_blocks',
      'shard_plans',
      'planned_blocks',
      'superseded_versions',
      'pushes_in_flight',
    ],
    loss: 'upload_queue',
  },
  { tables: ['source_excludes'], loss: 'source_excludes' },
  { tables: ['retention_policies'], loss: 'retention_policies' },
];
const LOSS_ORDER: readonly StateLoss[] = [
  'account',
  'file_index',
  'upload_queue',
  'source_excludes',
  'retention_policies',
];

function quoted(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function columnsOf(db: StateDb, schema: 'main' | 'damaged', table: string): string[] {
  return (
    db.prepare(`PRAGMA ${schema}.table_info(${quoted(table)})`).all() as Array<{ name: string }>
  ).map((column) => column.name);
}

/** Copies the damaged database's rows of `table`, in the columns both have. */
function copyTable(db: StateDb, table: string): void {
  const theirs = new Set(columnsOf(db, 'damaged', table));
  // A table the damaged database did not have yet (an older Canopy made it) holds nothing.
  if (theirs.size === 0) return;
  const columns = columnsOf(db, 'main', table)
    .filter((column) => theirs.has(column))
    .map(quoted)
    .join(', ');
  db.exec(
    `INSERT INTO main.${quoted(table)} (${columns}) SELECT ${columns} FROM damaged.${quoted(table)}`,
  );
}

/** Copies what can be read of `damagedFile` into `db`, a new state database; returns what could not. */
function salvage(db: StateDb, damagedFile: string): StateLoss[] {
  const tables = (
    db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations' ORDER BY rowid",
      )
      .pluck()
      .all() as string[]
  ).filter((table) => !GROUPS.some((group) => group.tables.includes(table)));
  // The remaining tables are caches, each on its own.
  const groups: TableGroup[] = [...GROUPS, ...tables.map((table) => ({ tables: [table] }))];
  const lost = new Set<StateLoss>();
  const loseAll = (): void => {
    for (const group of groups) if (group.loss) lost.add(group.loss);
  };
  try {
    db.prepare('ATTACH DATABASE ? AS damaged').run(damagedFile);
  } catch (error) {
    // Its header is gone: nothing in it can be found.
    if (!(error instanceof Database.SqliteError)) throw error;
    loseAll();
    return LOSS_ORDER.filter((loss) => lost.has(loss));
  }
  try {
    for (const group of groups) {
      try {
        db.transaction(() => {
          for (const table of group.tables) copyTable(db, table);
        }).immediate();
      } catch (error) {
        // A damaged page, or rows that no longer hold together: the group goes whole.
        if (!(error instanceof Database.SqliteError)) throw error;
        if (group.loss) lost.add(group.loss);
      }
    }
  } finally {
    db.exec('DETACH DATABASE damaged');
  }
  return LOSS_ORDER.filter((loss) => lost.has(loss));
}

function moveWithJournal(from: string, to: string): void {
  for (const suffix of ['', '-wal', '-shm'])
    if (existsSync(`${from}${suffix}`)) renameSync(`${from}${suffix}`, `${to}${suffix}`);
}

/** Rebuilds the damaged state database `file` from what can be read of it; opens it. */
function rebuild(file: string, now: number): { db: StateDb; repair: StateRepair } {
  const rebuilding = `${file}.rebuilding`;
  const aside = `${file}.damaged-${new Date(now).toISOString().replaceAll(':', '-')}`;
  for (const suffix of ['', '-wal', '-shm', '-journal'])
    rmSync(`${rebuilding}${suffix}`, { force: true });
  const made = openStateDatabase(rebuilding);
  let lost: StateLoss[];
  try {
    lost = existsSync(file) ? salvage(made, file) : LOSS_ORDER.slice();
    // Into the one file, so it moves whole.
    made.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    made.close();
  }
  moveWithJournal(file, aside);
  moveWithJournal(rebuilding, file);
  clearDamageMark(file);
  return { db: openStateDatabase(file), repair: { setAsideAs: aside, lost } };
}

/**
 * Opens the state database `file`; rebuilds it first when it was marked damaged, or when it
 * cannot be opened for damage. `alone` runs the rebuild with the Canopy home to this process
 * alone (HomeLock.alone), or returns null while another process has it open.
 */
export function openStateDatabaseRepairing(
  file: string,
  alone: (
    work: () => { db: StateDb; repair: StateRepair | null },
  ) => { db: StateDb; repair: StateRepair | null } | null,
  now: number,
): { db: StateDb; repair: StateRepair | null } {
  // A rebuild stopped between setting the damaged file aside and putting the new one in place:
  // the rebuilt one is whole, and goes in place.
  const stopped = !existsSync(file) && existsSync(`${file}.rebuilding`);
  if (!stopped && !isMarkedDamaged(file)) {
    try {
      return { db: openStateDatabase(file), repair: null };
    } catch (error) {
      if (!isDamageError(error)) throw error;
    }
  }
  const rebuilt = alone(() => {
    if (!stopped) return rebuild(file, now);
    moveWithJournal(`${file}.rebuilding`, file);
    clearDamageMark(file);
    return { db: openStateDatabase(file), repair: null };
  });
  if (!rebuilt)
    throw new EngineError(
      'busy',
      `Canopy's state database ${file} is damaged, and another Canopy process has it open: close it (the Canopy app too), then run this again to have it rebuilt`,
      { retryable: true },
    );
  return rebuilt;
}
