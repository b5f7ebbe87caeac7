import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { copyDatabase } from '../../../server/store/database-copy.ts';

// A read-only service serves from a copy of its database: the copy must hold what the write-ahead
// log left on the disk holds (the last commits before an unsafe removal), and go when asked.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('copyDatabase', () => {
  it('copies the database with the commits still in its log, and removes the copy', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-db-copy-'));
    dirs.push(dir);
    const file = path.join(dir, 'service.sqlite');
    const writer = new Database(file);
    try {
      writer.pragma('journal_mode = WAL');
      writer.pragma('wal_autocheckpoint = 0');
      writer.exec('CREATE TABLE versions (id TEXT)');
      const insert = writer.prepare('INSERT INTO versions (id) VALUES (?)');
      for (const id of ['first', 'second', 'third']) insert.run(id);
      // Still open and never checkpointed: the rows are in the log only, as after a pull.
      expect(existsSync(`${file}-wal`)).toBe(true);
      const copy = copyDatabase(file);
      expect(path.dirname(copy.file)).not.toBe(dir);
      const reader = new Database(copy.file);
      try {
        expect(reader.prepare('SELECT id FROM versions ORDER BY rowid').pluck().all()).toEqual([
          'first',
          'second',
          'third',
        ]);
      } finally {
        reader.close();
      }
      copy.remove();
      expect(existsSync(path.dirname(copy.file))).toBe(false);
    } finally {
      writer.close();
    }
  });

  it('copies into a folder it is given, and removes only its own files from it', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-db-copy-'));
    const into = mkdtempSync(path.join(os.tmpdir(), 'canopy-db-into-'));
    dirs.push(dir, into);
    const file = path.join(dir, 'service.sqlite');
    const writer = new Database(file);
    writer.pragma('journal_mode = WAL');
    writer.exec("CREATE TABLE buckets (name TEXT); INSERT INTO buckets VALUES ('Photos')");
    writer.close();
    writeFileSync(path.join(into, 'service.sock'), '');
    const copy = copyDatabase(file, into);
    expect(copy.file).toBe(path.join(into, 'service.sqlite'));
    const reader = new Database(copy.file);
    expect(reader.prepare('SELECT name FROM buckets').pluck().all()).toEqual(['Photos']);
    reader.close();
    copy.remove();
    expect(readdirSync(into)).toEqual(['service.sock']);
  });

  it('copies a database closed cleanly, which has no log', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-db-copy-'));
    dirs.push(dir);
    const file = path.join(dir, 'service.sqlite');
    const writer = new Database(file);
    writer.pragma('journal_mode = WAL');
    writer.exec("CREATE TABLE buckets (name TEXT); INSERT INTO buckets VALUES ('Photos')");
    writer.close();
    expect(existsSync(`${file}-wal`)).toBe(false);
    const copy = copyDatabase(file);
    const reader = new Database(copy.file);
    try {
      expect(reader.prepare('SELECT name FROM buckets').pluck().all()).toEqual(['Photos']);
    } finally {
      reader.close();
      copy.remove();
    }
  });
});
