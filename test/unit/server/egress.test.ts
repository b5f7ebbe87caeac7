import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../server/store/database.ts';
import { addEgress, monthlyEgress } from '../../../server/store/egress.ts';

// Bytes served are counted without a sync of their own; every other commit must still be
// synced, or a confirmed shard could be forgotten by a power loss.

const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-egress-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NOVEMBER = Date.UTC(2026, 10, 23);
const DECEMBER = Date.UTC(2026, 11, 1);
/** PRAGMA synchronous's value for FULL. */
const FULL = 2;

describe('egress', () => {
  it('adds up per user and month, is kept when the store reopens, and leaves commits synced', () => {
    const file = path.join(dir, 'store.db');
    const db = openDatabase(file);
    try {
      addEgress(db, 'ann', 1000, NOVEMBER);
      addEgress(db, 'ann', 234, NOVEMBER);
      addEgress(db, 'bob', 7, NOVEMBER);
      addEgress(db, 'ann', 5, DECEMBER);
      expect(db.pragma('synchronous', { simple: true })).toBe(FULL);
    } finally {
      db.close();
    }
    const reopened = openDatabase(file);
    try {
      expect(monthlyEgress(reopened, 'ann', NOVEMBER)).toBe(1234);
      expect(monthlyEgress(reopened, 'bob', NOVEMBER)).toBe(7);
      expect(monthlyEgress(reopened, 'ann', DECEMBER)).toBe(5);
      expect(monthlyEgress(reopened, 'cy', NOVEMBER)).toBe(0);
    } finally {
      reopened.close();
    }
  });
});
