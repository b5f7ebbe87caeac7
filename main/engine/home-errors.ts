import path from 'node:path';
import { EngineError, isDiskFull, isEngineError } from '../api/index.ts';
import { DAMAGED_DATABASE_MSG, DATA_FILE_MISSING_MSG, DISK_FAILED_MSG } from '../protocol/index.ts';
import {
  isDamagedDatabase,
  isDamageError,
  markDamaged,
  STATE_BUSY_TIMEOUT_MS,
  stateFileOf,
} from '../state/index.ts';
import type { Engine } from './engine.ts';
import { isSqliteWriteRefusal, unusableFolderError } from './unusable-folder.ts';

// The Canopy home holds the state database, the staging folder and the metadata cache; any
// request may write there, and read the state database. Its failures would otherwise reach the
// user as SQLite's own words, with a stack, and are mapped here, for every request, in one
// place:
// - a full disk ("database or disk is full", a bare ENOSPC): `disk_full`, naming the folder;
// - a state database another process kept writing to for longer than a request waits
//   ("database is locked"): `busy`;
// - the home's disk failing a read or write (EIO, or SQLite's SQLITE_IOERR_*: an fsync that
//   failed on a failing or pulled-out disk): `disk_unavailable`, naming the folder. SQLite rolls
//   back the transaction it could not make durable, so what was recorded before stands;
// - a damaged state database ("database disk image is malformed"): `state_damaged`, and the
//   database is marked, for the next opening of it to rebuild it from what is intact
//   (state-repair.ts). SQLite finds damage only on the page a query reads, so it shows here,
//   from whichever request read that page;
// - the embedded service's database damaged, its disk failing, or files of its data missing
//   (its answer says so): named as the user's own file or disk, beside the backups.
// Errors already mapped (a full restore target, a full service) pass.

/**
 * The embedded service's database damaged, its disk failing a read or write, or files of its
 * data missing: the user's own, kept beside the backups, rather than a server's that an
 * operator restores or replaces.
 */
function localServiceError(error: unknown, engine: Engine | undefined): unknown {
  if (!isEngineError(error, 'server_error')) return error;
  const told = [DAMAGED_DATABASE_MSG, DISK_FAILED_MSG, DATA_FILE_MISSING_MSG].find((msg) =>
    error.message.includes(msg),
  );
  if (told === undefined) return error;
  let dataDir: string | null;
  try {
    dataDir = engine?.localDataDir() ?? null;
  } catch {
    // The state database cannot say either: the server's words stand.
    return error;
  }
  if (dataDir === null) return error;
  if (told === DAMAGED_DATABASE_MSG) return localDatabaseDamaged(dataDir, error);
  return told === DISK_FAILED_MSG
    ? localDiskFailed(dataDir, error)
    : localDataFileMissing(dataDir, error);
}

/** Files of the embedded service's data in `dataDir` gone from its disk. */
function localDataFileMissing(dataDir: string, cause: unknown): EngineError {
  return new EngineError(
    'disk_unavailable',
    `files of the backups in ${dataDir} are missing from its disk (removed by a disk check that found them damaged, or left out of a copy of the folder): check the disk, and put back a copy of the folder if you keep one`,
    { cause },
  );
}

/** The disk of the embedded service's data in `dataDir` failed a read or a write. */
function localDiskFailed(dataDir: string, cause: unknown): EngineError {
  return new EngineError(
    'disk_unavailable',
    `the disk holding the backups (${dataDir}) failed to read or write them (an I/O error): the disk may be failing; check it for errors, and run this again`,
    { cause },
  );
}

/** The embedded service's database in `dataDir` found damaged, with no copy to put back. */
export function localDatabaseDamaged(dataDir: string, cause: unknown): EngineError {
  return new EngineError(
    'local_database_damaged',
    `the database of the backups in ${dataDir} (service.sqlite) is damaged on its disk, and Canopy has no sound copy of it to put in its place: put back a copy of that file if you keep one`,
    { cause },
  );
}

/**
 * The disk's failure to read or write a file that `error` is: an I/O error (EIO), with the path
 * Node names, or SQLite's (SQLITE_IOERR_FSYNC, _WRITE, _READ, …: the state database's); as a
 * failing disk gives. Undefined for other errors. A full disk's SQLITE_IOERR_SHMSIZE is told as
 * one (isDiskFull), before this.
 */
function ioFailureOf(error: unknown): { code: string; path?: string } | undefined {
  if (error instanceof EngineError) return undefined;
  const { code, path: failed } = (error ?? {}) as { code?: unknown; path?: unknown };
  if (code !== 'EIO' && !(typeof code === 'string' && code.startsWith('SQLITE_IOERR')))
    return undefined;
  return typeof failed === 'string' ? { code, path: failed } : { code };
}

/**
 * Where a disk failed, as told: the home, or the folder of a file elsewhere that a request
 * read or wrote (a restore's target, a backup's source) and that its own mapping did not name.
 */
function failedFolder(home: string, failed: string | undefined): string {
  if (failed === undefined) return `${home}, where Canopy keeps its state,`;
  const resolved = path.resolve(failed);
  const inHome = resolved === home || resolved.startsWith(home + path.sep);
  return inHome ? `${home}, where Canopy keeps its state,` : path.dirname(resolved);
}

/** Exported for its test; the engine maps every request's errors through withHomeErrors. */
export function homeError(error: unknown, home: string, engine?: Engine): unknown {
  if (engine) {
    const local = localServiceError(error, engine);
    if (local !== error) return local;
  }
  if (!(error instanceof EngineError) && isDiskFull(error))
    return new EngineError(
      'disk_full',
      `not enough free space in ${home}, where Canopy keeps its state; free some space and run it again`,
      { cause: error },
    );
  if (!(error instanceof EngineError) && (error as { code?: unknown }).code === 'SQLITE_BUSY')
    return new EngineError(
      'busy',
      `another process kept Canopy's data in ${home} busy for more than ${STATE_BUSY_TIMEOUT_MS / 1000} s; run this again once it is done`,
      { retryable: true, cause: error },
    );
  // The state database refused, its disk made read-only while Canopy runs: told as at the
  // opening. Only SQLite's refusals, which come from the state: any other EROFS is another
  // folder's (a restore's target), told by what wrote there.
  if (isSqliteWriteRefusal(error)) {
    const unwritable = unusableFolderError(error, home, 'where Canopy keeps its state');
    if (unwritable !== error) return unwritable;
  }
  const ioFailure = ioFailureOf(error);
  if (ioFailure !== undefined)
    return new EngineError(
      'disk_unavailable',
      `the disk holding ${failedFolder(home, ioFailure.path)} failed a read or write (${ioFailure.code}): the disk may be failing; check it for errors, and run this again`,
      { cause: error },
    );
  if (isDamageError(error)) {
    const file = stateFileOf(home);
    let damaged: boolean;
    try {
      // The embedded service's database is in this process too; its damage is not this one's.
      damaged = isDamagedDatabase(file);
    } catch {
      // The check itself failed (the disk went): the request's own error says more.
      return error;
    }
    if (!damaged) return error;
    try {
      markDamaged(file);
    } catch {
      // No room for the mark: the next request that reads the damaged page marks it then.
    }
    return new EngineError(
      'state_damaged',
      `Canopy's state database ${file} is damaged (${(error as Error).message}): it is rebuilt from what is intact in it when Canopy next opens it; run this again`,
      { retryable: true, cause: error },
    );
  }
  return error;
}

/** Opens the engine (its state database), and maps the home's failures of every request. */
export function withHomeErrors(open: () => Engine, home: string): Engine {
  let engine: Engine;
  try {
    engine = open();
  } catch (error) {
    throw unusableFolderError(homeError(error, home), home, 'where Canopy keeps its state');
  }
  return new Proxy(engine, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        try {
          const result: unknown = Reflect.apply(value, target, args);
          return result instanceof Promise
            ? result.catch((error: unknown) => {
                throw homeError(error, home, target);
              })
            : result;
        } catch (error) {
          throw homeError(error, home, target);
        }
      };
    },
  });
}
