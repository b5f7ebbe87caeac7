import {
  INVOICE_STATUSES,
  SEVERITIES,
  type InvoiceStatus,
  type Severity,
} from '../main/protocol/index.ts';
import type { ServiceContext } from './context.ts';
import { evaluateQuota } from './store/accounting.ts';
import { issueEnrollmentCode } from './store/enrollment-codes.ts';
import { addInvoice } from './store/invoices.ts';
import { raiseNotification } from './store/notifications.ts';
import { createUser, findUserByEmail, setQuota, type UserRow } from './store/users.ts';

// Administrative operations behind `canopy-server`. They open the same SQLite database as a
// running `serve` (WAL + busy timeout), so they work while it runs.

/** Why an administrative operation was refused, for a script running `canopy-server --json`. */
export type AdminErrorCode = 'user_not_found' | 'user_exists' | 'invalid_input';

export class AdminError extends Error {
  constructor(
    readonly code: AdminErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'AdminError';
  }
}

function requireUserByEmail(ctx: ServiceContext, email: string): UserRow {
  const user = findUserByEmail(ctx.db, email);
  if (!user) throw new AdminError('user_not_found', `no user with email ${email}`);
  return user;
}

export function addUser(
  ctx: ServiceContext,
  email: string,
  quotaBytes: number | null,
): { userId: string; code: string; expiresAt: number } {
  return ctx.transact(() => {
    if (findUserByEmail(ctx.db, email))
      throw new AdminError('user_exists', `a user with email ${email} already exists`);
    const now = ctx.now();
    const user = createUser(ctx.db, email, quotaBytes, now);
    const issued = issueEnrollmentCode(ctx.db, user.id, now, ctx.options.enrollmentCodeLifetimeMs);
    return { userId: user.id, code: issued.code, expiresAt: issued.expiresAt };
  });
}

export function newEnrollmentCode(
  ctx: ServiceContext,
  email: string,
): { userId: string; code: string; expiresAt: number } {
  return ctx.transact(() => {
    const user = requireUserByEmail(ctx, email);
    const issued = issueEnrollmentCode(
      ctx.db,
      user.id,
      ctx.now(),
      ctx.options.enrollmentCodeLifetimeMs,
    );
    return { userId: user.id, code: issued.code, expiresAt: issued.expiresAt };
  });
}

export function changeQuota(ctx: ServiceContext, email: string, quotaBytes: number | null): void {
  ctx.transact(() => {
    const user = requireUserByEmail(ctx, email);
    setQuota(ctx.db, user.id, quotaBytes);
    evaluateQuota(ctx.db, user.id, ctx.now());
  });
}

export function recordInvoice(
  ctx: ServiceContext,
  input: {
    email: string;
    start: number;
    end: number;
    amount: number;
    status: string;
    subscriptionId: string | null;
  },
): string {
  if (!(INVOICE_STATUSES as readonly string[]).includes(input.status)) {
    throw new AdminError('invalid_input', `status must be one of ${INVOICE_STATUSES.join(', ')}`);
  }
  if (!(input.end > input.start))
    throw new AdminError('invalid_input', '--end must be after --start');
  return ctx.transact(() => {
    const user = requireUserByEmail(ctx, input.email);
    return addInvoice(
      ctx.db,
      {
        userId: user.id,
        billingStart: input.start,
        billingEnd: input.end,
        subscriptionId: input.subscriptionId,
        totalAmount: input.amount,
        status: input.status as InvoiceStatus,
      },
      ctx.now(),
    );
  });
}

export function postNotification(
  ctx: ServiceContext,
  input: { email: string; severity: string; message: string; key: string; sticky: boolean },
): string {
  if (!(SEVERITIES as readonly string[]).includes(input.severity)) {
    throw new AdminError('invalid_input', `severity must be one of ${SEVERITIES.join(', ')}`);
  }
  if (input.message.trim().length === 0)
    throw new AdminError('invalid_input', '--message must not be empty');
  return ctx.transact(() => {
    const user = requireUserByEmail(ctx, input.email);
    return raiseNotification(
      ctx.db,
      {
        userId: user.id,
        messageKey: input.key,
        severity: input.severity as Severity,
        dismissable: !input.sticky,
        message: input.message,
      },
      ctx.now(),
    );
  });
}

/** A fresh enrollment code for `email`, creating the user (no quota) on first use. */
export function enrollmentCodeCreatingUser(
  ctx: ServiceContext,
  email: string,
): { userId: string; code: string } {
  return findUserByEmail(ctx.db, email) ? newEnrollmentCode(ctx, email) : addUser(ctx, email, null);
}
