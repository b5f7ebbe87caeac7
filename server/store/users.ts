import { newUuid, type AccountTaxClass, type User } from '../../main/protocol/index.ts';
import type { Db } from './database.ts';
import { monthlyEgress } from './egress.ts';
import { sql } from './statements.ts';

export interface UserRow {
  id: string;
  email: string | null;
  display_name: string | null;
  locale: string | null;
  profile_image: string | null;
  accepted_tos_at: number | null;
  account_tax_class: AccountTaxClass;
  subscription_id: string | null;
  subscription_valid_until: string | null;
  quota_bytes: number | null;
  data_bytes: number;
  above_80: number;
  above_100: number;
}

export function createUser(db: Db, email: string, quotaBytes: number | null, now: number): UserRow {
  const id = newUuid();
  sql(db, 'INSERT INTO users (id, email, quota_bytes, created_at) VALUES (?, ?, ?, ?)').run(
    id,
    email,
    quotaBytes,
    now,
  );
  return requireUser(db, id);
}

export function findUser(db: Db, id: string): UserRow | undefined {
  return sql<[string], UserRow>(db, 'SELECT * FROM users WHERE id = ?').get(id);
}

export function findUserByEmail(db: Db, email: string): UserRow | undefined {
  return sql<[string], UserRow>(db, 'SELECT * FROM users WHERE email = ?').get(email);
}

export function requireUser(db: Db, id: string): UserRow {
  const row = findUser(db, id);
  if (!row) throw new Error(`user ${id} vanished`);
  return row;
}

export function userDto(db: Db, row: UserRow, now: number): User {
  return {
    id: row.id,
    email: row.email,
    display_name: row.display_name,
    locale: row.locale,
    profile_image: row.profile_image,
    accepted_tos_at: row.accepted_tos_at,
    account_tax_class: row.account_tax_class,
    subscription_id: row.subscription_id,
    subscription_valid_until: row.subscription_valid_until,
    monthly_egress: monthlyEgress(db, row.id, now),
  };
}

export type WritableUserFields = Partial<
  Pick<
    UserRow,
    'display_name' | 'locale' | 'profile_image' | 'accepted_tos_at' | 'account_tax_class'
  >
>;

export function updateUser(db: Db, id: string, fields: WritableUserFields): void {
  const entries = Object.entries(fields);
  if (entries.length === 0) return;
  // Column names come from the typed key list above, never from the request.
  const assignments = entries.map(([column]) => `${column} = ?`).join(', ');
  db.prepare(`UPDATE users SET ${assignments} WHERE id = ?`).run(
    ...entries.map(([, value]) => value),
    id,
  );
}

export function setQuota(db: Db, id: string, quotaBytes: number | null): void {
  sql(db, 'UPDATE users SET quota_bytes = ? WHERE id = ?').run(quotaBytes, id);
}
