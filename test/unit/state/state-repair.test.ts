import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  HomeLock,
  isDamagedDatabase,
  keepRetentionPolicy,
  keepSourceExcludes,
  markDamaged,
  openStateDatabase,
  openStateDatabaseRepairing,
  readAccount,
  retentionPolicyTextOf,
  sourceExcludesOf,
  stateFileOf,
  writeAccount,
  type AccountRecord,
  type StateDb,
} from '../../../main/state/index.ts';
import { damageHeader, damageTable } from '../../helpers/damaged-database.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-state-repair-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ACCOUNT: AccountRecord = {
  mode: 'local',
  server_url: null,
  local_data_dir: '/media/disk/canopy',
  user_id: 'user-1',
  key_id: 'key-1',
  fingerprint: 'fp',
  email: null,
  device_name: 'desk',
  device_key_account: 'device-key:home-1',
  enrolled_at: 1,
};

/**
 * A home whose state holds an account, exclude rules, a retention policy, 3 000 indexed files
 * and an upload.
 */
function filledHome(name: string): { home: string; file: string } {
  const home = path.join(scratch, name);
  mkdirSync(home, { recursive: true });
  const file = stateFileOf(home);
  const db = openStateDatabase(file);
  writeAccount(db, ACCOUNT);
  keepSourceExcludes(db, '/home/me/Pictures', ['*.raw', '!keep.raw']);
  keepRetentionPolicy(db, 'b', '{"daily":7}');
  db.prepare(
    "INSERT INTO file_index_sources (id, bucket_id, source_dir, version_id, entry_count) VALUES (1, 'b', '/home/me/Pictures', 'v', 3000)",
  ).run();
  const insert = db.prepare(
    "INSERT INTO file_index (source_id, path, kind, size, mtime_ns, ino, mode) VALUES (1, ?, 'file', 1, '1', ?, 420)",
  );
  db.transaction(() => {
    for (let i = 0; i < 3000; i += 1) insert.run(`photos/img-${i}.jpg`, String(i));
  })();
  db.prepare(
    "INSERT INTO uploads (version_id, bucket_id, storage_host, storage_authorization, staging_dir, files, bytes_scanned, new_bytes, created_at) VALUES ('v', 'b', 'h', 'sa', '/s', 1, 1, 1, 1)",
  ).run();
  db.close();
  return { home, file };
}

function count(db: StateDb, table: string): number {
  return db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
}

/** Opens `home`'s state as an engine does, holding the home shared. */
function open(home: string) {
  const lock = HomeLock.share(home);
  try {
    return {
      ...openStateDatabaseRepairing(
        stateFileOf(home),
        (work) => lock.alone(work),
        Date.UTC(2026, 10, 26),
      ),
      lock,
    };
  } catch (error) {
    lock.release();
    throw error;
  }
}

describe('a damaged state database', () => {
  it('marked damaged, is rebuilt at its next opening with all but the tables it cannot read, and kept as it was', () => {
    const { home, file } = filledHome('file-index');
    damageTable(file, 'file_index');
    const damagedBytes = readFileSync(file);
    expect(isDamagedDatabase(file)).toBe(true);
    markDamaged(file);

    const { db, repair, lock } = open(home);
    try {
      expect(repair).toEqual({
        setAsideAs: `${file}.damaged-2026-11-26T00-00-00.000Z`,
        lost: ['file_index'],
      });
      expect(readAccount(db)).toMatchObject(ACCOUNT);
      expect(sourceExcludesOf(db, '/home/me/Pictures')).toEqual(['*.raw', '!keep.raw']);
      expect(retentionPolicyTextOf(db, 'b')).toBe('{"daily":7}');
      expect(count(db, 'uploads')).toBe(1);
      expect(count(db, 'file_index')).toBe(0);
      expect(count(db, 'file_index_sources')).toBe(0);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(readFileSync(repair?.setAsideAs ?? '').equals(damagedBytes)).toBe(true);
    } finally {
      db.close();
      lock.release();
    }
    // Rebuilt once: the next opening finds nothing to do.
    const again = open(home);
    again.db.close();
    again.lock.release();
    expect(again.repair).toBeNull();
    expect(isDamagedDatabase(file)).toBe(false);
  });

  it('damaged in an index only, loses no row', () => {
    const { home, file } = filledHome('index-only');
    damageTable(file, 'file_index_by_dir');
    markDamaged(file);
    const { db, repair, lock } = open(home);
    try {
      expect(repair?.lost).toEqual([]);
      expect(count(db, 'file_index')).toBe(3000);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      db.close();
      lock.release();
    }
  });

  it('with its header gone, is rebuilt at once when opened, and says it lost everything', () => {
    const { home, file } = filledHome('header');
    damageHeader(file);
    const { db, repair, lock } = open(home);
    try {
      expect(repair?.lost).toEqual([
        'account',
        'file_index',
        'upload_queue',
        'source_excludes',
        'retention_policies',
      ]);
      expect(readAccount(db)).toBeUndefined();
      expect(existsSync(repair?.setAsideAs ?? '')).toBe(true);
    } finally {
      db.close();
      lock.release();
    }
  });

  it('is left as it is while another process has the home open, with a clear error', () => {
    const { home, file } = filledHome('busy');
    damageTable(file, 'file_index');
    markDamaged(file);
    const other = HomeLock.share(home);
    try {
      expect(() => open(home)).toThrow(
        expect.objectContaining({
          code: 'busy',
          message: expect.stringContaining('another Canopy process has it open'),
        }),
      );
      expect(isDamagedDatabase(file)).toBe(true);
    } finally {
      other.release();
    }
    const { db, repair, lock } = open(home);
    db.close();
    lock.release();
    expect(repair?.lost).toEqual(['file_index']);
  });

  it('rebuilt up to setting the damaged file aside, is opened rebuilt', () => {
    const { home, file } = filledHome('crashed');
    // As a rebuild leaves it when killed between its two renames.
    writeFileSync(`${file}.found-damaged`, 'x');
    const rebuilt = openStateDatabase(`${file}.rebuilding`);
    writeAccount(rebuilt, { ...ACCOUNT, device_name: 'rebuilt' });
    rebuilt.close();
    rmSync(file);
    const { db, repair, lock } = open(home);
    try {
      expect(repair).toBeNull();
      expect(readAccount(db)?.device_name).toBe('rebuilt');
      expect(existsSync(`${file}.rebuilding`)).toBe(false);
    } finally {
      db.close();
      lock.release();
    }
  });
});
