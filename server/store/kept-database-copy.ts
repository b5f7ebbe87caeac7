import {
  mkdirSync,
  copyFileSync,
  existsSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { RETIRED_PACKS_DIR } from '../blocks/block-store.ts';
import { fsyncPath } from '../blocks/fsync-path.ts';
import { CHUNK_FILE_SUFFIX } from '../blocks/metadata-chunk-files.ts';
import { SERVICE_DATABASE_FILE } from '../data-dir.ts';
import type { Db } from './database.ts';
import { isDamagedDatabase } from './damaged-database.ts';

// A copy of the service's database kept beside it, for the day the database is damaged on its
// disk (a failing disk, a power cut on a disk that lied about its writes): every backup in the
// folder is named there, and without it the packs are bytes no one can find again. The copy is
// made when the service closes, and every hour while it serves, if it changed the database;
// a copy that SQLite's quick_check does not pass (the database damaged already) never
// replaces the one kept.
//
// A request that reads a damaged page leaves word (`found-damaged`); the next start that serves
// the folder alone then sets the damaged database aside and puts the copy in its place. What
// was recorded after the copy was made is not in it: versions stored since are gone, and their
// packs, which no row names, go with the crash leftovers. A device's next backup finds its
// bucket at the version the copy has, and sends what the service lacks of its files. Packs let
// go since the copy was made (collected, compacted) wait in `retired-packs/` until a newer copy
// is kept (blocks/block-store.ts), so the copy put back finds every block it names.

export const KEPT_COPY_FILE = `${SERVICE_DATABASE_FILE}.copy`;
const DAMAGE_MARK_FILE = `${SERVICE_DATABASE_FILE}.found-damaged`;
/** SQLite's files beside a database in WAL mode. */
const COMPANION_SUFFIXES = ['-wal', '-shm'];

/** What putting the kept copy back did, for the operator and the user. */
export interface DatabaseRestore {
  /** Where the damaged database was set aside. */
  readonly setAsideAs: string;
  /** When the copy put in its place was made (epoch ms). */
  readonly copyMadeAt: number;
}

/** Whether the database at `file` passes SQLite's quick_check. */
function passesQuickCheck(file: string): boolean {
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    return db.pragma('quick_check', { simple: true }) === 'ok';
  } catch (error) {
    if (isDamagedDatabase(error)) return false;
    throw error;
  } finally {
    db?.close();
  }
}

/**
 * Copies the open database `db` of `dataDir` to the kept copy, whole and durable, through a
 * temporary file. Returns false, keeping the copy there was, when the new one does not pass
 * quick_check. Rejects, with no temporary file left, when the copy cannot be written (a full
 * disk).
 */
export async function keepDatabaseCopy(db: Db, dataDir: string): Promise<boolean> {
  const kept = path.join(dataDir, KEPT_COPY_FILE);
  const partial = `${kept}.partial`;
  try {
    rmSync(partial, { force: true });
    await db.backup(partial);
    if (!passesQuickCheck(partial)) return false;
    fsyncPath(partial);
    renameSync(partial, kept);
    fsyncPath(dataDir);
    return true;
  } finally {
    rmSync(partial, { force: true });
    for (const suffix of COMPANION_SUFFIXES) rmSync(`${partial}${suffix}`, { force: true });
  }
}

/** Leaves word that the database of `dataDir` was found damaged, for the next start. */
export function markDatabaseDamaged(dataDir: string): void {
  writeFileSync(path.join(dataDir, DAMAGE_MARK_FILE), `${new Date().toISOString()}\n`, {
    mode: 0o600,
  });
}

/** Whether a request left word that the database of `dataDir` was found damaged. */
export function isDatabaseMarkedDamaged(dataDir: string): boolean {
  return existsSync(path.join(dataDir, DAMAGE_MARK_FILE));
}

/**
 * Puts the kept copy in place of the database of `dataDir` when a request found it damaged
 * (markDatabaseDamaged) and quick_check agrees, setting the damaged one aside. Only while no
 * other process serves the folder. Undefined when nothing was put back: no word of damage, the
 * database sound after all (the word goes), or no copy kept (the word stays, and the service
 * reports the damage as before).
 */
export function putBackKeptCopy(dataDir: string, now: number): DatabaseRestore | undefined {
  const mark = path.join(dataDir, DAMAGE_MARK_FILE);
  if (!existsSync(mark)) return undefined;
  const database = path.join(dataDir, SERVICE_DATABASE_FILE);
  if (existsSync(database) && passesQuickCheck(database)) {
    rmSync(mark, { force: true });
    return undefined;
  }
  const kept = path.join(dataDir, KEPT_COPY_FILE);
  if (!existsSync(kept)) return undefined;
  const setAsideAs = `${database}.damaged-${new Date(now).toISOString().replaceAll(':', '-')}`;
  // Copied, not moved: the kept copy stays, should this one be damaged too. In place by one
  // rename at the end, so that a crash on the way leaves a database file, damaged or not, and
  // the word of damage, for the next start to try again.
  const incoming = `${database}.incoming`;
  copyFileSync(kept, incoming);
  fsyncPath(incoming);
  if (existsSync(database)) copyFileSync(database, setAsideAs);
  // The damaged database's log must not be played onto the copy: it is kept with the damaged
  // file, whose last commits it may hold. The index of the log is only ever SQLite's own.
  if (existsSync(`${database}-wal`)) renameSync(`${database}-wal`, `${setAsideAs}-wal`);
  rmSync(`${database}-shm`, { force: true });
  renameSync(incoming, database);
  fsyncPath(dataDir);
  // Packs and files of metadata chunks retired since the copy was made may be named in it
  // (block-store.ts): back in place. Those it does not name go with the crash leftovers at this
  // start.
  const retired = path.join(dataDir, RETIRED_PACKS_DIR);
  if (existsSync(retired))
    for (const name of readdirSync(retired)) {
      const home = name.endsWith(CHUNK_FILE_SUFFIX)
        ? path.join(dataDir, 'metadata', 'chunks')
        : path.join(dataDir, 'packs');
      mkdirSync(home, { recursive: true });
      renameSync(path.join(retired, name), path.join(home, name));
    }
  rmSync(mark, { force: true });
  return { setAsideAs, copyMadeAt: statSync(kept).mtimeMs };
}
