import { afterAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { call } from '../helpers/http-client.ts';
import { createBucket, enrolledDevice, push } from '../helpers/flows.ts';
import { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// §18 items 15 and 44: each rate limit on its own server instance with small values.

const services: TestService[] = [];
afterAll(async () => {
  for (const service of services) await service.close();
});

describe('§18 rate limits', () => {
  it('15: the 11th rapid unauthenticated request from one IP is 429 with Retry-After, whatever came before; one refill later it is served', async () => {
    // Burst 10, one token per 500 ms, so the refill interval is observable in a test.
    const service = await startTestService({ ipRateLimit: { burst: 10, refillPerSecond: 2 } });
    services.push(service);
    const newcomer = new TestDevice();
    const statuses: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      statuses.push(
        (
          await call('POST', `${service.api}/auth/enroll`, {
            json: { code: 'WRONG', pem: newcomer.pem },
          })
        ).status,
      );
      statuses.push(
        (await call('GET', `${service.api}/auth/device_api_key/start_regwait/not-a-fingerprint`))
          .status,
      );
    }
    expect(statuses).toEqual([401, 404, 401, 404, 401, 404, 401, 404, 401, 404]);
    const limited = await call('POST', `${service.api}/auth/enroll`, {
      json: { code: 'WRONG', pem: newcomer.pem },
    });
    expect(limited.status).toBe(429);
    expect(limited.json.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(
      (
        await call(
          'GET',
          `${service.api}/auth/device_api_key/start_regwait/${newcomer.fingerprint}`,
        )
      ).status,
    ).toBe(429);
    await sleep(600);
    expect(
      (await call('GET', `${service.api}/auth/device_api_key/start_regwait/nope`)).status,
    ).toBe(404);
    expect(
      (await call('GET', `${service.api}/auth/device_api_key/start_regwait/nope`)).status,
    ).toBe(429);
  });

  it("44: a burst beyond a device key's limit is 429 with Retry-After; other keys are unaffected", async () => {
    const service = await startTestService({
      credentialRateLimit: { burst: 5, refillPerSecond: 1 },
    });
    services.push(service);
    const ann = await enrolledDevice(service, 'ann@example.org');
    const bob = await enrolledDevice(service, 'bob@example.org');
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1)
      statuses.push((await call('GET', `${service.api}/buckets`, { token: ann.token() })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    const limited = await call('GET', `${service.api}/buckets`, { token: ann.token() });
    expect(limited.headers.get('retry-after')).toBe('1');
    expect((await call('GET', `${service.api}/buckets`, { token: bob.token() })).status).toBe(200);
    // 401 comes before 429: a bad token is refused as such even while the key is limited.
    expect((await call('GET', `${service.api}/buckets`, { token: 'x.y.z' })).status).toBe(401);
  });

  it('44: a storage authorization has its own bucket', async () => {
    const service = await startTestService({
      credentialRateLimit: { burst: 3, refillPerSecond: 1 },
    });
    services.push(service);
    const ann = await enrolledDevice(service, 'ann@example.org');
    const bucketId = await createBucket(service, ann, 'b');
    const pushed = await push(service, ann, { bucketId, expectedDataSize: 10, previousId: null });
    const sa = pushed.json.storage_authorization as string;
    const statuses: number[] = [];
    for (let i = 0; i < 4; i += 1)
      statuses.push(
        (await call('POST', `${service.api}/blocks/missing`, { token: sa, json: [] })).status,
      );
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  it('44: logs contain no token, SA or enrollment code', async () => {
    const lines: string[] = [];
    const originalWrite = process.stdout.write.bind(process.stdout);
    process.stdout.write = (chunk: string | Uint8Array, ...rest: unknown[]) => {
      lines.push(String(chunk));
      return (originalWrite as (...args: unknown[]) => boolean)(chunk, ...rest);
    };
    try {
      const service = await startTestService({ logRequests: true });
      services.push(service);
      const { code } = service.addUser('log@example.org');
      const device = new TestDevice();
      await call('POST', `${service.api}/auth/enroll`, { json: { code, pem: device.pem } });
      device.userId = (
        await call('GET', `${service.api}/auth/device_api_key/start_regwait/${device.fingerprint}`)
      ).json.user_id;
      const token = device.token();
      const bucketId = await createBucket(service, device, 'b');
      const pushed = await push(service, device, {
        bucketId,
        expectedDataSize: 10,
        previousId: null,
      });
      const sa = pushed.json.storage_authorization as string;
      await call('POST', `${service.api}/blocks/missing`, { token: sa, json: [] });
      await call('GET', `${service.api}/buckets?token=${token}`, { token });
      const log = lines.join('');
      expect(log).toContain('"url"');
      expect(log).not.toContain(token.split('.')[2]);
      expect(log).not.toContain(sa.split('.')[2]);
      expect(log).not.toContain(code);
    } finally {
      process.stdout.write = originalWrite;
    }
  });
});
