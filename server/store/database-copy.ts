import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The service database copied, with its write-ahead log, into a private folder: what a service
// whose data folder is on a disk mounted read-only serves from (ServiceOptions.readOnly).
// SQLite cannot open a WAL database in place there: it needs to make its index file beside it,
// and a log left by an unsafe removal holds the last commits. The copy takes that log in as any
// open does; what the service records while it serves (a device last seen, the bytes sent) goes
// to the copy, and with it when the service closes.

export interface DatabaseCopy {
  readonly file: string;
  remove(): void;
}

/** SQLite's files of a database: the log, and the index of the log made beside it. */
const COMPANION_SUFFIXES = ['-wal', '-shm'];

/**
 * Copies `file` into `into` (an existing private folder), or else into a new folder of its own
 * in the system's temporary folder.
 */
export function copyDatabase(file: string, into?: string): DatabaseCopy {
  const dir = into ?? mkdtempSync(path.join(os.tmpdir(), 'canopy-read-only-'));
  const copy = path.join(dir, path.basename(file));
  const remove = (): void => {
    if (into === undefined) {
      rmSync(dir, { recursive: true, force: true });
      return;
    }
    for (const name of [copy, ...COMPANION_SUFFIXES.map((suffix) => `${copy}${suffix}`)])
      rmSync(name, { force: true });
  };
  try {
    copyFileSync(file, copy);
    try {
      copyFileSync(`${file}-wal`, `${copy}-wal`);
    } catch (error) {
      // Closed cleanly, the database has no log left.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  } catch (error) {
    remove();
    throw error;
  }
  return { file: copy, remove };
}
