import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { openDatabase } from '../../../server/store/database.ts';
import {
  isDatabaseMarkedDamaged,
  keepDatabaseCopy,
  markDatabaseDamaged,
  putBackKeptCopy,
} from '../../../server/store/kept-database-copy.ts';
import { damageTable } from '../../helpers/damaged-database.ts';

// The copy of the service's database kept beside it, and putting it back: only a database that
// quick_check finds damaged is replaced, and only by a copy that passed it when it was made.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-kept-copy-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A data folder with a service database holding `users` users, and a copy of it kept. */
async function folderWithCopy(name: string, users: number): Promise<string> {
  const dir = path.join(scratch, name);
  mkdirSync(dir);
  const db = openDatabase(path.join(dir, 'service.sqlite'));
  try {
    for (let i = 0; i < users; i += 1)
      db.prepare('INSERT INTO users (id, email, created_at) VALUES (?, ?, ?)').run(
        `user-${i}`,
        `user-${i}@example.org`,
        0,
      );
    expect(await keepDatabaseCopy(db, dir)).toBe(true);
  } finally {
    db.close();
  }
  return dir;
}

function usersIn(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT count(*) FROM users').pluck().get() as number;
  } finally {
    db.close();
  }
}

describe('the kept copy of the service database', () => {
  it('is not put back over a database that turns out sound: the word of damage goes', async () => {
    const dir = await folderWithCopy('sound', 1);
    // Recorded after the copy was made: putting the copy back would lose it.
    const db = openDatabase(path.join(dir, 'service.sqlite'));
    db.prepare('INSERT INTO users (id, email, created_at) VALUES (?, ?, ?)').run('late', 'l@x', 0);
    db.close();
    markDatabaseDamaged(dir);
    expect(putBackKeptCopy(dir, Date.now())).toBeUndefined();
    expect(isDatabaseMarkedDamaged(dir)).toBe(false);
    expect(usersIn(path.join(dir, 'service.sqlite'))).toBe(2);
  });

  it('is put in place of a damaged database, which is set aside', async () => {
    const dir = await folderWithCopy('damaged', 3);
    damageTable(path.join(dir, 'service.sqlite'), 'users');
    markDatabaseDamaged(dir);
    const restore = putBackKeptCopy(dir, Date.parse('2026-11-26T12:00:00Z'));
    expect(restore).toEqual({
      setAsideAs: path.join(dir, 'service.sqlite.damaged-2026-11-26T12-00-00.000Z'),
      copyMadeAt: statSync(path.join(dir, 'service.sqlite.copy')).mtimeMs,
    });
    expect(isDatabaseMarkedDamaged(dir)).toBe(false);
    expect(usersIn(path.join(dir, 'service.sqlite'))).toBe(3);
    expect(existsSync(restore?.setAsideAs ?? '')).toBe(true);
    // The copy stays, should the database be damaged again.
    expect(existsSync(path.join(dir, 'service.sqlite.copy'))).toBe(true);
  });

  it('leaves a damaged database, and the word of it, when no copy is kept', async () => {
    const dir = await folderWithCopy('no-copy', 1);
    rmSync(path.join(dir, 'service.sqlite.copy'));
    damageTable(path.join(dir, 'service.sqlite'), 'users');
    markDatabaseDamaged(dir);
    expect(putBackKeptCopy(dir, Date.now())).toBeUndefined();
    expect(isDatabaseMarkedDamaged(dir)).toBe(true);
    expect(readdirSync(dir).filter((name) => name.includes('.damaged-'))).toEqual([]);
  });

  it('is not replaced by a copy of a damaged database', async () => {
    const dir = await folderWithCopy('copy-of-damaged', 2);
    const kept = statSync(path.join(dir, 'service.sqlite.copy')).mtimeMs;
    damageTable(path.join(dir, 'service.sqlite'), 'users');
    const db = new Database(path.join(dir, 'service.sqlite'));
    try {
      // backup() copies the damaged page as it is; quick_check on the copy finds it.
      expect(await keepDatabaseCopy(db, dir)).toBe(false);
    } finally {
      db.close();
    }
    expect(statSync(path.join(dir, 'service.sqlite.copy')).mtimeMs).toBe(kept);
    expect(usersIn(path.join(dir, 'service.sqlite.copy'))).toBe(2);
    expect(readdirSync(dir).filter((name) => name.includes('partial'))).toEqual([]);
  });
});
