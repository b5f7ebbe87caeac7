import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http-client.ts';
import { createBucket, enrolledDevice, push } from '../helpers/flows.ts';
import { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// §18 items 13, 14, 16–20.

let service: TestService;
beforeAll(async () => {
  service = await startTestService({
    enrollmentCodeLifetimeMs: 60_000,
    registrationRecencyMs: 60_000,
  });
});
afterAll(async () => service.close());

async function enroll(code: string, device: TestDevice): Promise<Awaited<ReturnType<typeof call>>> {
  return call('POST', `${service.api}/auth/enroll`, {
    json: { code, pem: device.pem, device_name: 'laptop' },
  });
}

describe('§18 enrollment', () => {
  it('13: enroll with a valid code returns {user_id, key_id, fingerprint} and the key works', async () => {
    const { userId, code } = service.addUser('e13@example.org');
    const device = new TestDevice();
    const response = await enroll(code, device);
    expect(response.status).toBe(200);
    expect(response.json).toEqual({
      user_id: userId,
      key_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      fingerprint: device.fingerprint,
    });
    device.userId = userId;
    const who = await call('GET', `${service.api}/auth/who_am_i`, { token: device.token() });
    expect(who.status).toBe(200);
    expect(who.json).toEqual({
      user_id: userId,
      key_id: response.json.key_id,
      fingerprint: device.fingerprint,
      email: 'e13@example.org',
      storage_host: service.url,
    });
    const notes = await call('GET', `${service.api}/notifications`, { token: device.token() });
    expect(notes.json.map((n: { message_key: string }) => n.message_key)).toContain(
      'device_key_added',
    );
  });

  it('14: reused, expired, unknown or malformed codes get the same 401; a duplicate fingerprint is 409 and leaves the code unused', async () => {
    const { code } = service.addUser('e14@example.org');
    const first = new TestDevice();
    expect((await enroll(code, first)).status).toBe(200);
    const reused = await enroll(code, new TestDevice());
    expect(reused.status).toBe(401);
    expect(reused.json).toEqual({ msg: 'not authorized', code: 'not_authorized' });
    expect((await enroll('ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ', new TestDevice())).json).toEqual(
      reused.json,
    );
    expect((await enroll('%%%', new TestDevice())).status).toBe(401);

    const { code: second } = service.addUser('e14b@example.org');
    const duplicate = await enroll(second, first);
    expect(duplicate.status).toBe(409);
    expect(duplicate.json.code).toBe('conflict');
    expect((await enroll(second, new TestDevice())).status).toBe(200);

    const { code: stale } = service.addUser('e14c@example.org');
    service.advance(61_000);
    expect((await enroll(stale, new TestDevice())).status).toBe(401);
  });

  it('16: a code from POST /auth/enrollment_codes enrolls a key for the caller, in any accepted spelling', async () => {
    const owner = await enrolledDevice(service, 'e16@example.org');
    const spell = [
      (code: string) => code.toLowerCase(),
      (code: string) => code.replace(/-/g, ' '),
      (code: string) => code.replace(/-/g, '').replace(/1/g, 'I').replace(/0/g, 'O'),
      (code: string) => code.replace(/1/g, 'l'),
    ];
    for (const variant of spell) {
      const issued = await call('POST', `${service.api}/auth/enrollment_codes`, {
        token: owner.token(),
      });
      expect(issued.status).toBe(200);
      expect(issued.json.expires_at).toBeGreaterThan(Math.floor(Date.now() / 1000));
      const response = await enroll(variant(issued.json.code as string), new TestDevice());
      expect(response.status).toBe(200);
      expect(response.json.user_id).toBe(owner.userId);
    }
  });
});

describe('§18 device keys', () => {
  it('17: POST /auth/device_api_key returns {id, fingerprint}; re-registering is 409 for any user until deleted', async () => {
    const ann = await enrolledDevice(service, 'e17a@example.org');
    const bob = await enrolledDevice(service, 'e17b@example.org');
    const extra = new TestDevice();
    const created = await call('POST', `${service.api}/auth/device_api_key`, {
      token: ann.token(),
      json: { pem: extra.pem, name: 'phone' },
    });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-/),
      fingerprint: extra.fingerprint,
    });
    expect(
      (
        await call('POST', `${service.api}/auth/device_api_key`, {
          token: ann.token(),
          json: { pem: extra.pem },
        })
      ).status,
    ).toBe(409);
    expect(
      (
        await call('POST', `${service.api}/auth/device_api_key`, {
          token: bob.token(),
          json: { pem: extra.pem },
        })
      ).status,
    ).toBe(409);
    const listed = await call('GET', `${service.api}/auth/device_api_key`, { token: ann.token() });
    expect(listed.json.map((key: { fingerprint: string }) => key.fingerprint)).toEqual([
      ann.fingerprint,
      extra.fingerprint,
    ]);
    expect(listed.json[1]).toEqual({
      id: created.json.id,
      user_id: ann.userId,
      fingerprint: extra.fingerprint,
      name: 'phone',
      last_seen_at: null,
    });
    expect(
      (
        await call('DELETE', `${service.api}/auth/device_api_key/${created.json.id}`, {
          token: ann.token(),
        })
      ).status,
    ).toBe(204);
    expect(
      (
        await call('POST', `${service.api}/auth/device_api_key`, {
          token: bob.token(),
          json: { pem: extra.pem },
        })
      ).status,
    ).toBe(200);
  });

  it('18: start_regwait returns {user_id} once registered; 408 after the hold without one or for a deleted key', async () => {
    const ann = await enrolledDevice(service, 'e18@example.org');
    const newcomer = new TestDevice();
    const url = `${service.api}/auth/device_api_key/start_regwait/${newcomer.fingerprint}`;
    const waiting = await call('GET', url);
    expect(waiting.status).toBe(408);
    expect(waiting.json.code).toBe('timeout');
    const poll = call('GET', url);
    const created = await call('POST', `${service.api}/auth/device_api_key`, {
      token: ann.token(),
      json: { pem: newcomer.pem },
    });
    expect((await poll).json).toEqual({ user_id: ann.userId });
    expect((await call('GET', url)).status).toBe(200);
    await call('DELETE', `${service.api}/auth/device_api_key/${created.json.id}`, {
      token: ann.token(),
    });
    expect((await call('GET', url)).status).toBe(408);
    expect(
      (
        await call(
          'GET',
          `${service.api}/auth/device_api_key/start_regwait/${newcomer.fingerprint.toUpperCase()}`,
        )
      ).status,
    ).toBe(404);
  });

  it('18: a registration older than the recency counts as absent', async () => {
    const ann = await enrolledDevice(service, 'e18b@example.org');
    const newcomer = new TestDevice();
    await call('POST', `${service.api}/auth/device_api_key`, {
      token: ann.token(),
      json: { pem: newcomer.pem },
    });
    service.advance(61_000);
    expect(
      (
        await call(
          'GET',
          `${service.api}/auth/device_api_key/start_regwait/${newcomer.fingerprint}`,
        )
      ).status,
    ).toBe(408);
  });

  it('19: who_am_i names the caller and the storage_host that pushes return', async () => {
    const ann = await enrolledDevice(service, 'e19@example.org');
    const who = await call('GET', `${service.api}/auth/who_am_i`, { token: ann.token() });
    const bucketId = await createBucket(service, ann, 'b');
    const pushed = await push(service, ann, {
      bucketId,
      expectedDataSize: 0,
      previousId: null,
    });
    expect(who.json.storage_host).toBe(pushed.json.storage_host);
    expect(who.json.key_id).toBe(ann.keyId);
  });

  it('20: deleting the calling key is 204; the key and every SA it obtained then get 401', async () => {
    const ann = await enrolledDevice(service, 'e20@example.org');
    const bucketId = await createBucket(service, ann, 'b');
    const pushed = await push(service, ann, {
      bucketId,
      expectedDataSize: 10,
      previousId: null,
    });
    const sa = pushed.json.storage_authorization as string;
    expect(
      (await call('POST', `${service.api}/blocks/missing`, { token: sa, json: [] })).status,
    ).toBe(200);
    const token = ann.token();
    expect(
      (await call('DELETE', `${service.api}/auth/device_api_key/${ann.keyId}`, { token })).status,
    ).toBe(204);
    expect((await call('GET', `${service.api}/auth/who_am_i`, { token })).status).toBe(401);
    expect(
      (await call('POST', `${service.api}/blocks/missing`, { token: sa, json: [] })).status,
    ).toBe(401);
  });

  it('last_seen_at records successful authentication', async () => {
    const ann = await enrolledDevice(service, 'seen@example.org');
    await call('GET', `${service.api}/buckets`, { token: ann.token() });
    const key = await call('GET', `${service.api}/auth/device_api_key/${ann.keyId}`, {
      token: ann.token(),
    });
    expect(key.json.last_seen_at).toBeGreaterThan(0);
  });
});
