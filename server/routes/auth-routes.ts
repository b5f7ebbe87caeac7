import { setTimeout as sleep } from 'node:timers/promises';
import {
  isFingerprint,
  isUuid,
  parseDeviceKeyCreateRequest,
  parseEnrollRequest,
} from '../../main/protocol/index.ts';
import { conflict, notAuthorized, notFound, ServiceError } from '../errors.ts';
import { readJsonBody, readNoBody } from '../http/request-body.ts';
import { noContent } from '../http/respond.ts';
import {
  deleteDeviceKey,
  findDeviceKey,
  findLiveKeyByFingerprint,
  insertDeviceKey,
  listDeviceKeys,
  toDeviceKeyDto,
} from '../store/device-keys.ts';
import { findLiveCode, issueEnrollmentCode, markCodeUsed } from '../store/enrollment-codes.ts';
import { raiseNotification } from '../store/notifications.ts';
import { requireUser } from '../store/users.ts';
import type { Db } from '../store/database.ts';
import { unixSeconds } from '../store/time.ts';
import type { RouteSpec } from './route-spec.ts';

// §8: enrollment, device keys, regwait and who_am_i.

function announceKey(
  db: Db,
  userId: string,
  name: string | null,
  fingerprint: string,
  now: number,
): void {
  const label = name ?? 'unnamed device';
  raiseNotification(
    db,
    {
      userId,
      messageKey: 'device_key_added',
      severity: 'info',
      dismissable: true,
      message: `A new device was linked: ${label} (${fingerprint.slice(0, 8)}…)`,
    },
    now,
  );
}

export const authRoutes: RouteSpec[] = [
  {
    method: 'POST',
    url: '/auth/enroll',
    auth: 'ip',
    async handler(ctx, request) {
      const input = parseEnrollRequest(
        await readJsonBody(request.raw, ctx.options.limits.jsonBodyBytes),
      );
      const now = ctx.now();
      return ctx.transact(() => {
        const code = findLiveCode(ctx.db, input.code, now);
        if (!code) throw notAuthorized();
        if (findLiveKeyByFingerprint(ctx.db, input.key.fingerprint)) {
          throw conflict('fingerprint: this key is already registered');
        }
        markCodeUsed(ctx.db, code.hash, now);
        const key = insertDeviceKey(
          ctx.db,
          {
            userId: code.userId,
            fingerprint: input.key.fingerprint,
            spki: input.key.spki,
            name: input.deviceName,
          },
          now,
        );
        announceKey(ctx.db, code.userId, input.deviceName, key.fingerprint, now);
        return { user_id: code.userId, key_id: key.id, fingerprint: key.fingerprint };
      });
    },
  },
  {
    method: 'POST',
    url: '/auth/enrollment_codes',
    auth: 'device',
    async handler(ctx, request) {
      await readNoBody(request.raw, ctx.options.limits.jsonBodyBytes);
      const issued = issueEnrollmentCode(
        ctx.db,
        request.device.userId,
        ctx.now(),
        ctx.options.enrollmentCodeLifetimeMs,
      );
      return { code: issued.code, expires_at: unixSeconds(issued.expiresAt) };
    },
  },
  {
    method: 'GET',
    url: '/auth/device_api_key',
    auth: 'device',
    async handler(ctx, request) {
      return Promise.resolve(listDeviceKeys(ctx.db, request.device.userId));
    },
  },
  {
    method: 'POST',
    url: '/auth/device_api_key',
    auth: 'device',
    async handler(ctx, request) {
      const input = parseDeviceKeyCreateRequest(
        await readJsonBody(request.raw, ctx.options.limits.jsonBodyBytes),
      );
      const now = ctx.now();
      const userId = request.device.userId;
      return ctx.transact(() => {
        if (findLiveKeyByFingerprint(ctx.db, input.key.fingerprint)) {
          throw conflict('fingerprint: this key is already registered');
        }
        const key = insertDeviceKey(
          ctx.db,
          { userId, fingerprint: input.key.fingerprint, spki: input.key.spki, name: input.name },
          now,
        );
        announceKey(ctx.db, userId, input.name, key.fingerprint, now);
        return { id: key.id, fingerprint: key.fingerprint };
      });
    },
  },
  {
    method: 'GET',
    url: '/auth/device_api_key/start_regwait/:fingerprint',
    auth: 'ip',
    async handler(ctx, request) {
      const fingerprint = request.params['fingerprint'];
      if (!isFingerprint(fingerprint)) throw notFound();
      const deadline = Date.now() + ctx.options.regwaitHoldMs;
      for (;;) {
        const key = findLiveKeyByFingerprint(ctx.db, fingerprint);
        // An old registration counts as absent, so a public key cannot reveal its owner forever.
        if (key && key.created_at + ctx.options.registrationRecencyMs > ctx.now()) {
          return { user_id: key.user_id };
        }
        if (Date.now() >= deadline || request.raw.destroyed) break;
        await sleep(Math.min(100, Math.max(1, deadline - Date.now())));
      }
      throw new ServiceError('timeout', 'no registration yet; poll again');
    },
  },
  {
    method: 'GET',
    url: '/auth/device_api_key/:key_id',
    auth: 'device',
    async handler(ctx, request) {
      const id = request.params['key_id'];
      const row = isUuid(id) ? findDeviceKey(ctx.db, request.device.userId, id) : undefined;
      if (!row) throw notFound();
      return Promise.resolve(toDeviceKeyDto(row));
    },
  },
  {
    method: 'DELETE',
    url: '/auth/device_api_key/:key_id',
    auth: 'device',
    async handler(ctx, request, reply) {
      const id = request.params['key_id'];
      const row = isUuid(id) ? findDeviceKey(ctx.db, request.device.userId, id) : undefined;
      if (!row) throw notFound();
      deleteDeviceKey(ctx.db, row.id, ctx.now());
      return Promise.resolve(noContent(reply));
    },
  },
  {
    method: 'GET',
    url: '/auth/who_am_i',
    auth: 'device',
    async handler(ctx, request) {
      const user = requireUser(ctx.db, request.device.userId);
      return Promise.resolve({
        user_id: user.id,
        key_id: request.device.keyId,
        fingerprint: request.device.fingerprint,
        email: user.email,
        storage_host: ctx.storageHost,
      });
    },
  },
];
