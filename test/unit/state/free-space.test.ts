import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  openStateDatabase,
  releaseFreeSpace,
  STATE_BUSY_TIMEOUT_MS,
  type StateDb,
} from '../../../main/state/index.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-free-space-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A state database holding `rows` rows of 4 KiB in a table of their own. */
function filled(name: string, rows: number): StateDb {
  const db = openStateDatabase(path.join(scratch, name));
  db.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)');
  const insert = db.prepare('INSERT INTO filler (bytes) VALUES (randomblob(4096))');
  db.transaction(() => {
    for (let row = 0; row < rows; row += 1) insert.run();
  })();
  return db;
}

const pages = (db: StateDb, which: 'page_count' | 'freelist_count'): number =>
  Number(db.pragma(which, { simple: true }));

describe('releaseFreeSpace', () => {
  it('gives back the pages deleted rows left, when they are a large share of the file', () => {
    const db = filled('large.sqlite', 2000);
    try {
      db.exec('DELETE FROM filler WHERE id > 100');
      expect(releaseFreeSpace(db)).toBe('released');
      expect(pages(db, 'freelist_count')).toBe(0);
      expect(pages(db, 'page_count')).toBeLessThan(400);
      expect(db.prepare('SELECT COUNT(*) FROM filler').pluck().get()).toBe(100);
    } finally {
      db.close();
    }
  });

  it('leaves a few free pages for the rows to come', () => {
    const db = filled('few.sqlite', 2000);
    try {
      db.exec('DELETE FROM filler WHERE id <= 200');
      expect(releaseFreeSpace(db)).toBe('not needed');
      expect(pages(db, 'freelist_count')).toBeGreaterThan(150);
    } finally {
      db.close();
    }
  });

  it('does not wait long for another process writing, and keeps the busy wait it had', () => {
    const db = filled('busy.sqlite', 2000);
    const other = new Database(path.join(scratch, 'busy.sqlite'));
    try {
      db.exec('DELETE FROM filler');
      other.prepare('BEGIN IMMEDIATE').run();
      const started = performance.now();
      expect(releaseFreeSpace(db)).toBe('not now');
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(pages(db, 'freelist_count')).toBeGreaterThan(1900);
      expect(Number(db.pragma('busy_timeout', { simple: true }))).toBe(STATE_BUSY_TIMEOUT_MS);
      other.prepare('ROLLBACK').run();
      expect(releaseFreeSpace(db)).toBe('released');
    } finally {
      other.close();
      db.close();
    }
  });
});
