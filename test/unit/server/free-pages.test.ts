import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase, releaseFreePages, type Db } from '../../../server/store/database.ts';

// The service's database gives the pages a large deletion freed back to the disk, and leaves
// the few that routine work frees and uses again.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-free-pages-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const always = (): boolean => true;

/** `rows` rows of 4 KiB each in a table of their own. */
function fill(db: Db, rows: number): void {
  db.exec('CREATE TABLE IF NOT EXISTS filler (id INTEGER PRIMARY KEY, bytes BLOB)');
  const insert = db.prepare('INSERT INTO filler (bytes) VALUES (randomblob(4096))');
  db.transaction(() => {
    for (let row = 0; row < rows; row += 1) insert.run();
  })();
}

const freePages = (db: Db): number => Number(db.pragma('freelist_count', { simple: true }));

describe('releaseFreePages', () => {
  it('gives back what a large deletion freed, and the file shrinks', () => {
    const file = path.join(scratch, 'large.sqlite');
    const db = openDatabase(file);
    try {
      fill(db, 5000);
      db.pragma('wal_checkpoint(TRUNCATE)');
      const before = statSync(file).size;
      db.exec('DELETE FROM filler');
      expect(freePages(db)).toBeGreaterThan(4000);

      expect(releaseFreePages(db, always)).toBeGreaterThan(4000);
      expect(freePages(db)).toBe(0);
      db.pragma('wal_checkpoint(TRUNCATE)');
      expect(statSync(file).size).toBeLessThan(before / 10);
    } finally {
      db.close();
    }
  });

  it('leaves a few free pages for reuse, and stops when its time is up', () => {
    const db = openDatabase(path.join(scratch, 'few.sqlite'));
    try {
      fill(db, 5000);
      // 4 MiB or less free: what a backup's passing rows leave.
      db.exec('DELETE FROM filler WHERE id <= 900');
      expect(releaseFreePages(db, always)).toBe(0);
      expect(freePages(db)).toBeGreaterThan(800);

      db.exec('DELETE FROM filler');
      expect(releaseFreePages(db, () => false)).toBe(0);
      expect(freePages(db)).toBeGreaterThan(4000);
    } finally {
      db.close();
    }
  });

  it('leaves a database made before incremental vacuum as it is', () => {
    const file = path.join(scratch, 'older.sqlite');
    // As a server before this one made it: tables first, in SQLite's default mode.
    const older = new Database(file);
    older.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)');
    older.close();
    const db = openDatabase(file);
    try {
      expect(db.pragma('auto_vacuum', { simple: true })).toBe(0);
      fill(db, 2000);
      db.exec('DELETE FROM filler');
      expect(releaseFreePages(db, always)).toBe(0);
      expect(freePages(db)).toBeGreaterThan(1500);
    } finally {
      db.close();
    }
  });
});
