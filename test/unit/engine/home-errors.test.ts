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
});
