import { newUuid, type DeviceKey } from '../../main/protocol/index.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';

export interface DeviceKeyRow {
  id: string;
  user_id: string;
  fingerprint: string;
  spki: Buffer;
  name: string | null;
  created_at: number;
  last_seen_at: number | null;
  deleted_at: number | null;
}

export function toDeviceKeyDto(row: DeviceKeyRow): DeviceKey {
  return {
    id: row.id,
    user_id: row.user_id,
    fingerprint: row.fingerprint,
    name: row.name,
    last_seen_at: row.last_seen_at === null ? null : Math.floor(row.last_seen_at / 1000),
  };
}

export function findLiveKeyByFingerprint(db: Db, fingerprint: string): DeviceKeyRow | undefined {
  return sql<[string], DeviceKeyRow>(
    db,
    'SELECT * FROM device_keys WHERE fingerprint = ? AND deleted_at IS NULL',
  ).get(fingerprint);
}

/** Inserts a key; the caller has checked the fingerprint is free inside the same transaction. */
export function insertDeviceKey(
  db: Db,
  input: { userId: string; fingerprint: string; spki: Uint8Array; name: string | null },
  now: number,
): DeviceKeyRow {
  const id = newUuid();
  sql(
    db,
    'INSERT INTO device_keys (id, user_id, fingerprint, spki, name, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  ).run(id, input.userId, input.fingerprint, Buffer.from(input.spki), input.name, now);
  const row = sql<[string], DeviceKeyRow>(db, 'SELECT * FROM device_keys WHERE id = ?').get(id);
  if (!row) throw new Error('device key insert lost');
  return row;
}

export function listDeviceKeys(db: Db, userId: string): DeviceKey[] {
  return sql<[string], DeviceKeyRow>(
    db,
    'SELECT * FROM device_keys WHERE user_id = ? AND deleted_at IS NULL ORDER BY seq ASC',
  )
    .all(userId)
    .map(toDeviceKeyDto);
}

export function findDeviceKey(db: Db, userId: string, id: string): DeviceKeyRow | undefined {
  return sql<[string, string], DeviceKeyRow>(
    db,
    'SELECT * FROM device_keys WHERE user_id = ? AND id = ? AND deleted_at IS NULL',
  ).get(userId, id);
}

export function deleteDeviceKey(db: Db, id: string, now: number): void {
  sql(db, 'UPDATE device_keys SET deleted_at = ? WHERE id = ?').run(now, id);
}

/** Records that key `id` was used at `now`, once per `granularityMs`; returns the rows it changed. */
export function touchLastSeen(db: Db, id: string, now: number, granularityMs: number): number {
  return sql(
    db,
    'UPDATE device_keys SET last_seen_at = ? WHERE id = ? AND (last_seen_at IS NULL OR last_seen_at <= ?)',
  ).run(now, id, now - granularityMs).changes;
}
