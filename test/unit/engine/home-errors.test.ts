import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { homeError } from '../../../main/engine/home-errors.ts';
import { openStateDatabase, stateFileOf } from '../../../main/state/index.ts';

// SQLite's own errors from the Canopy home, as a request meets them, told as what they mean.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-home-errors-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('homeError', () => {
  it("tells SQLite's refusal to write as the read-only disk of the home, and only when it is one", () => {
    const home = path.join(scratch, 'read-only');
    mkdirSync(home);
    openStateDatabase(stateFileOf(home)).close();
    /** SQLite's own refusal to write the state database (SQLITE_READONLY). */
    const refusal = (): unknown => {
      const db = new Database(stateFileOf(home), { readonly: true });
      try {
        db.prepare("INSERT INTO source_excludes VALUES ('/a', '[]')").run();
      } catch (error) {
        return error;
      } finally {
        db.close();
      }
      throw new Error('the write was not refused');
    };
    // A writable home: SQLite's words stand, for what else refused.
    const writable = refusal();
    expect(homeError(writable, home)).toBe(writable);
    // The home's disk made read-only (a bind mount remounted so, as root).
    execFileSync('mount', ['--bind', home, home]);
    try {
      execFileSync('mount', ['-o', 'remount,bind,ro', home]);
      expect(homeError(refusal(), home)).toMatchObject({
        code: 'permission_denied',
        message: `cannot write in ${home}, where Canopy keeps its state: the disk is read-only (one the system made read-only after errors may be failing: to restore from your backups meanwhile, set CANOPY_HOME to a folder on another disk and log in there)`,
      });
    } finally {
      execFileSync('umount', [home]);
    }
  });

  it('tells a state database another process keeps writing to as busy, and opening it waits for no write', () => {
    const home = path.join(scratch, 'busy');
    mkdirSync(home);
    openStateDatabase(stateFileOf(home)).close();
    const writer = new Database(stateFileOf(home));
    writer.exec("BEGIN IMMEDIATE; INSERT INTO source_excludes VALUES ('/a', '[]')");
    try {
      // Opening reads only (its migrations are applied): it does not wait for the writer, which
      // would hold it past the test's time.
      const opened = openStateDatabase(stateFileOf(home));
      // A request that would write, past its wait (none, here).
      opened.pragma('busy_timeout = 0');
      let refused: unknown;
      try {
        opened.prepare("INSERT INTO source_excludes VALUES ('/b', '[]')").run();
      } catch (error) {
        refused = error;
      } finally {
        opened.close();
      }
      expect(homeError(refused, home)).toMatchObject({
        code: 'busy',
        retryable: true,
        message: `another process kept Canopy's data in ${home} busy for more than 30 s; run this again once it is done`,
      });
    } finally {
      writer.exec('ROLLBACK');
      writer.close();
    }
  });
  it("tells the disk's I/O errors as the disk failing, naming the home or the folder of the file", () => {
    const home = path.join(scratch, 'failing');
    const failure = (code: string, file?: string): Error =>
      Object.assign(new Error(`${code}: failed`), { code, ...(file ? { path: file } : {}) });
    const advice = 'the disk may be failing; check it for errors, and run this again';
    expect(homeError(failure('SQLITE_IOERR_WRITE'), home)).toMatchObject({
      code: 'disk_unavailable',
      message: `the disk holding ${home}, where Canopy keeps its state, failed a read or write (SQLITE_IOERR_WRITE): ${advice}`,
    });
    expect(homeError(failure('EIO', path.join(home, 'metadata', 'v1.car')), home)).toMatchObject({
      message: `the disk holding ${home}, where Canopy keeps its state, failed a read or write (EIO): ${advice}`,
    });
    expect(homeError(failure('EIO', '/mnt/photos/2026/a.jpg'), home)).toMatchObject({
      message: `the disk holding /mnt/photos/2026 failed a read or write (EIO): ${advice}`,
    });
    // No room for SQLite's shared memory is a full disk, not a failing one.
    expect(homeError(failure('SQLITE_IOERR_SHMSIZE'), home)).toMatchObject({ code: 'disk_full' });
  });
});
