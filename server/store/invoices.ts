import { newUuid, type Invoice, type InvoiceStatus } from '../../main/protocol/index.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';
import { isoTimestamp } from './time.ts';

interface InvoiceRow {
  id: string;
  billing_start: number;
  billing_end: number;
  subscription_id: string | null;
  total_amount: number;
  status: InvoiceStatus;
  created_at: number;
}

export interface NewInvoice {
  readonly userId: string;
  readonly billingStart: number;
  readonly billingEnd: number;
  readonly subscriptionId: string | null;
  readonly totalAmount: number;
  readonly status: InvoiceStatus;
}

export function addInvoice(db: Db, input: NewInvoice, now: number): string {
  const id = newUuid();
  sql(
    db,
    `INSERT INTO invoices (id, user_id, billing_start, billing_end, subscription_id, total_amount, status, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    id,
    input.userId,
    input.billingStart,
    input.billingEnd,
    input.subscriptionId,
    input.totalAmount,
    input.status,
    now,
  );
  return id;
}

function toDto(row: InvoiceRow): Invoice {
  return {
    id: row.id,
    billing_start: isoTimestamp(row.billing_start),
    billing_end: isoTimestamp(row.billing_end),
    subscription_id: row.subscription_id,
    total_amount: row.total_amount,
    status: row.status,
    created_at: isoTimestamp(row.created_at),
  };
}

export function listInvoices(db: Db, userId: string): Invoice[] {
  return sql<[string], InvoiceRow>(
    db,
    'SELECT * FROM invoices WHERE user_id = ? ORDER BY created_at DESC, seq DESC',
  )
    .all(userId)
    .map(toDto);
}

export function findInvoice(db: Db, userId: string, id: string): Invoice | undefined {
  const row = sql<[string, string], InvoiceRow>(
    db,
    'SELECT * FROM invoices WHERE user_id = ? AND id = ?',
  ).get(userId, id);
  return row ? toDto(row) : undefined;
}
