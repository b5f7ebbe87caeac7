import {
  ACCOUNT_TAX_CLASSES,
  enumField,
  expectObject,
  isUuid,
  textField,
  ValidationError,
  type User,
} from '../../main/protocol/index.ts';
import { conflict, notFound } from '../errors.ts';
import { readJsonBody } from '../http/request-body.ts';
import { noContent } from '../http/respond.ts';
import { findInvoice, listInvoices } from '../store/invoices.ts';
import { deleteNotification, findNotification, listNotifications } from '../store/notifications.ts';
import { requireUser, updateUser, userDto, type WritableUserFields } from '../store/users.ts';
import type { RouteSpec } from './route-spec.ts';

// §13: the user's profile, invoices and notifications.

const USER_FIELDS = [
  'id',
  'email',
  'display_name',
  'locale',
  'profile_image',
  'accepted_tos_at',
  'account_tax_class',
  'subscription_id',
  'subscription_valid_until',
  'monthly_egress',
] as const satisfies readonly (keyof User)[];
const READ_ONLY: ReadonlySet<string> = new Set([
  'id',
  'email',
  'subscription_id',
  'subscription_valid_until',
  'monthly_egress',
]);
const MAX_PROFILE_IMAGE_BYTES = 256 * 1024;
const DATA_IMAGE = /^data:image\/(png|jpeg|webp|gif);base64,([A-Za-z0-9+/]*={0,2})$/;

function canonicalLocale(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || value.length === 0 || value.length > 35) {
    throw new ValidationError('locale', 'must be a BCP 47 tag of at most 35 characters');
  }
  try {
    const [canonical] = Intl.getCanonicalLocales(value);
    if (canonical === undefined) throw new RangeError('empty');
    return canonical;
  } catch {
    throw new ValidationError('locale', 'must be a well-formed BCP 47 tag');
  }
}

function profileImage(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string')
    throw new ValidationError('profile_image', 'must be a string or null');
  if (Buffer.byteLength(value, 'utf8') > MAX_PROFILE_IMAGE_BYTES) {
    throw new ValidationError('profile_image', 'must be at most 256 KiB');
  }
  if (value.startsWith('https://')) {
    if (value.length > 2048)
      throw new ValidationError('profile_image', 'URL must be at most 2048 characters');
    try {
      if (new URL(value).protocol === 'https:') return value;
    } catch {
      // falls through to the error below
    }
    throw new ValidationError('profile_image', 'must be an https URL or an image data URL');
  }
  const match = DATA_IMAGE.exec(value);
  const payload = match?.[2];
  if (
    payload === undefined ||
    payload.length % 4 !== 0 ||
    Buffer.from(payload, 'base64').toString('base64') !== payload
  ) {
    throw new ValidationError('profile_image', 'must be an https URL or an image data URL');
  }
  return value;
}

function acceptedTos(value: unknown, stored: number | null, nowSeconds: number): number {
  if (value === null) throw new ValidationError('accepted_tos_at', 'cannot be withdrawn');
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new ValidationError('accepted_tos_at', 'must be a positive integer timestamp');
  }
  if (stored !== null && value < stored)
    throw new ValidationError('accepted_tos_at', 'must not move backwards');
  if (value > nowSeconds + 60)
    throw new ValidationError('accepted_tos_at', 'must not be in the future');
  return value;
}

export const accountRoutes: RouteSpec[] = [
  {
    method: 'GET',
    url: '/users/current',
    auth: 'device',
    async handler(ctx, request) {
      return Promise.resolve(
        userDto(ctx.db, requireUser(ctx.db, request.device.userId), ctx.now()),
      );
    },
  },
  {
    method: 'PATCH',
    url: '/users/current',
    auth: 'device',
    async handler(ctx, request, reply) {
      const body = expectObject(
        await readJsonBody(request.raw, ctx.options.limits.jsonBodyBytes),
        USER_FIELDS,
        [],
      );
      if (Object.keys(body).length === 0)
        throw new ValidationError('body', 'must hold at least one field');
      const now = ctx.now();
      ctx.transact(() => {
        const row = requireUser(ctx.db, request.device.userId);
        const current = userDto(ctx.db, row, now);
        const changes: WritableUserFields = {};
        for (const field of USER_FIELDS) {
          if (!Object.hasOwn(body, field)) continue;
          const value = body[field];
          // Sending back the stored value is always fine (§13.1), so this comes first.
          if (value === current[field]) continue;
          if (READ_ONLY.has(field)) throw new ValidationError(field, 'read-only');
          switch (field) {
            case 'display_name':
              changes.display_name = value === null ? null : textField(value, field, 1, 100);
              break;
            case 'locale':
              changes.locale = canonicalLocale(value);
              break;
            case 'profile_image':
              changes.profile_image = profileImage(value);
              break;
            case 'accepted_tos_at':
              changes.accepted_tos_at = acceptedTos(
                value,
                row.accepted_tos_at,
                Math.floor(now / 1000),
              );
              break;
            case 'account_tax_class':
              changes.account_tax_class = enumField(value, field, ACCOUNT_TAX_CLASSES);
              break;
            default:
              throw new ValidationError(field, 'read-only');
          }
        }
        updateUser(ctx.db, row.id, changes);
      });
      return noContent(reply);
    },
  },
  {
    method: 'GET',
    url: '/invoices',
    auth: 'device',
    async handler(ctx, request) {
      return Promise.resolve(listInvoices(ctx.db, request.device.userId));
    },
  },
  {
    method: 'GET',
    url: '/invoices/:invoice_id',
    auth: 'device',
    async handler(ctx, request) {
      const id = request.params['invoice_id'];
      const invoice = isUuid(id) ? findInvoice(ctx.db, request.device.userId, id) : undefined;
      if (!invoice) throw notFound();
      return Promise.resolve(invoice);
    },
  },
  {
    method: 'GET',
    url: '/notifications',
    auth: 'device',
    async handler(ctx, request) {
      return Promise.resolve(listNotifications(ctx.db, request.device.userId));
    },
  },
  {
    method: 'DELETE',
    url: '/notifications/:notification_id',
    auth: 'device',
    async handler(ctx, request, reply) {
      const id = request.params['notification_id'];
      const notification = isUuid(id)
        ? findNotification(ctx.db, request.device.userId, id)
        : undefined;
      if (!notification) throw notFound();
      if (!notification.dismissable) throw conflict('this notification cannot be dismissed');
      deleteNotification(ctx.db, notification.id);
      return Promise.resolve(noContent(reply));
    },
  },
];
