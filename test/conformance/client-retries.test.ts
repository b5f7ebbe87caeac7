import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineError } from '../../main/api/index.ts';
import { ServiceClient } from '../../main/service/index.ts';
import { DAMAGED_DATABASE_MSG } from '../../main/protocol/index.ts';
import { CarReader } from '@ipld/car';
import { rawBlock } from '../helpers/cars.ts';
import { createBucket, enrolledDevice, storeVersion } from '../helpers/flows.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// The client's retry policy through a fault-injecting proxy in front of the real server.

let service: TestService;
let proxy: FaultProxy;
let ann: TestDevice;
beforeAll(async () => {
  service = await startTestService();
  proxy = await startFaultProxy(service.url);
  ann = await enrolledDevice(service, 'ann@example.org');
});
afterAll(async () => {
  await proxy.close();
  await service.close();
});

function client(attempts = 5): ServiceClient {
  return new ServiceClient({
    baseUrl: proxy.url,
    deviceToken: () => ann.token(),
    retry: { attempts, baseDelayMs: 20, maxDelayMs: 200 },
  });
}

describe('client retries', () => {
  it('retries 500, 503, resets and 429 (waiting Retry-After) and then succeeds', async () => {
    proxy.seen.length = 0;
    proxy.schedule([{ status: 500 }, 'reset', { status: 503 }, { status: 429, retryAfter: 1 }]);
    const buckets = await client().listBuckets();
    expect(buckets).toEqual([]);
    expect(proxy.seen).toHaveLength(5);
    const gapAfter429 = (proxy.seen[4]?.at ?? 0) - (proxy.seen[3]?.at ?? 0);
    expect(gapAfter429).toBeGreaterThanOrEqual(1000);
  });

  it('does not retry a final answer such as 404 or 401', async () => {
    proxy.seen.length = 0;
    await expect(client().getBucket('0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d')).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(proxy.seen).toHaveLength(1);
    proxy.seen.length = 0;
    proxy.schedule([{ status: 401 }]);
    await expect(client().listBuckets()).rejects.toMatchObject({ code: 'not_authorized' });
    expect(proxy.seen).toHaveLength(1);
  });

  it("does not retry a 500 that says this project's service has its database damaged", async () => {
    proxy.seen.length = 0;
    proxy.schedule([{ status: 500, msg: DAMAGED_DATABASE_MSG }]);
    await expect(client().listBuckets()).rejects.toMatchObject({
      code: 'server_error',
      retryable: false,
    });
    expect(proxy.seen).toHaveLength(1);
  });

  it('tells a redirect where it points, follows it nowhere, and asks once', async () => {
    // The server moved, and its old address sends every request to the new one.
    const moved = { redirectTo: service.url };
    const told = `${proxy.url} sent Canopy on to ${service.url}/api/v1/buckets (HTTP 301) rather than answering as a Canopy server: if the server has moved there, log in at its new address (canopy logout, then canopy login --server ${service.url}); a network that wants you to sign in first (a hotel's or café's Wi-Fi) answers so too: sign in from a web browser, then try again`;
    const bucketsBefore = await client().listBuckets();
    proxy.seen.length = 0;
    proxy.schedule([moved]);
    await expect(client().listBuckets()).rejects.toMatchObject({
      code: 'redirected',
      retryable: false,
      message: told,
    });
    // A POST is not sent again elsewhere (fetch would have made it a GET there).
    proxy.schedule([{ ...moved, status: 302 }]);
    await expect(
      client().createBucket({
        name: 'redirected',
        type: 'backup',
        storageClass: 'hot',
        bucketKeyPem: ann.pem,
      }),
    ).rejects.toMatchObject({ code: 'redirected', message: expect.stringContaining('HTTP 302') });
    expect(await client().listBuckets()).toEqual(bucketsBefore);
    // A streamed answer too, sent to a Wi-Fi's sign-in page.
    proxy.schedule([{ redirectTo: 'https://portal.example/login?from=' }]);
    await expect(client().blocksCar(proxy.url, [])).rejects.toMatchObject({
      code: 'redirected',
      message: expect.stringMatching(
        /^http:\/\/127\.0\.0\.1:\d+ sent Canopy on to https:\/\/portal\.example\/login\?from=\/api\/v1\/blocks\/car \(HTTP 301\) rather than answering as a Canopy server: if the server has moved there, log in at its new address \(canopy logout, then canopy login --server https:\/\/portal\.example\); /,
      ),
    });
    expect(proxy.seen.map((request) => request.method)).toEqual(['GET', 'POST', 'GET', 'POST']);
  });

  it("tells a web page where the service's answer should be, at once, and keeps a proxy's 502 page a failure to retry", async () => {
    const page = '<!DOCTYPE html><html><body>Welcome</body></html>';
    const address = `check the server's address, as its administrator gave it (a service under a path, such as https://example.org/canopy, needs that path)`;
    proxy.seen.length = 0;
    // A web app at the address, whose every path answers its page.
    proxy.schedule([{ status: 200, page }]);
    await expect(client().listBuckets()).rejects.toMatchObject({
      code: 'not_canopy_server',
      retryable: false,
      message: `${proxy.url} answered, but not as a Canopy server does (HTTP 200, a web page): ${address}`,
    });
    // Another web server's own 404 page, not the service's "not found".
    proxy.schedule([{ status: 404, page }]);
    await expect(client().getBucket('0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d')).rejects.toMatchObject({
      code: 'not_canopy_server',
      message: `${proxy.url} answered, but not as a Canopy server does (HTTP 404, a web page): ${address}`,
    });
    // A login page in front of the service: not "the key may have been revoked".
    proxy.schedule([{ status: 401, page }]);
    await expect(client().listBuckets()).rejects.toMatchObject({
      code: 'not_canopy_server',
      message: `${proxy.url} answered, but not as a Canopy server does (HTTP 401, a web page): something in front of the server (a login page, an access rule of a proxy) stopped the request: its administrator can let Canopy through`,
    });
    expect(proxy.seen).toHaveLength(3);
    // The server restarting behind its proxy: asked again, and answered.
    proxy.schedule([{ status: 502, page: '<html><body>502 Bad Gateway</body></html>' }]);
    expect(await client().listBuckets()).toEqual(expect.any(Array));
    expect(proxy.seen).toHaveLength(5);
  });

  it('gives up after the attempt budget with the last error', async () => {
    proxy.seen.length = 0;
    proxy.schedule([{ status: 502 }, { status: 502 }, { status: 502 }]);
    const failure = client(3).listBuckets();
    await expect(failure).rejects.toBeInstanceOf(EngineError);
    await expect(failure).rejects.toMatchObject({ code: 'server_error', retryable: true });
    expect(proxy.seen).toHaveLength(3);
    proxy.schedule([]);
  });

  it('reports a dead network as a retryable network error', async () => {
    const dead = new ServiceClient({
      baseUrl: 'http://127.0.0.1:9',
      deviceToken: () => ann.token(),
      retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
    });
    await expect(dead.listBuckets()).rejects.toMatchObject({ code: 'network', retryable: true });
  });

  it('completes a run of calls through 20 % seeded random faults', async () => {
    proxy.randomFaults(0.2, 42);
    const resilient = client(8);
    for (let i = 0; i < 15; i += 1) {
      const created = await resilient.createBucket({
        name: `b${i}`,
        type: 'backup',
        storageClass: 'hot',
        bucketKeyPem: ann.pem,
      });
      expect((await resilient.getBucket(created.id)).name).toBe(`b${i}`);
    }
    proxy.randomFaults(0, 1);
  });

  it('stops at once when its signal fires, whether it waits to retry or for a stalled answer', async () => {
    const patient = new ServiceClient({
      baseUrl: proxy.url,
      deviceToken: () => ann.token(),
      retry: { attempts: 5, baseDelayMs: 60_000, maxDelayMs: 60_000 },
    });
    // A 503, then a minute's wait before the retry: the stop ends the wait, and nothing more
    // is sent.
    proxy.seen.length = 0;
    proxy.schedule([{ status: 503 }]);
    const waiting = new AbortController();
    const retrying = patient.stoppedBy(waiting.signal).listBuckets();
    while (proxy.seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    setTimeout(() => waiting.abort(), 50);
    await expect(retrying).rejects.toMatchObject({ code: 'stopped' });
    expect(proxy.seen).toHaveLength(1);
    // An answer that would come in a minute: the request is cut off.
    proxy.schedule([{ delayMs: 60_000 }]);
    const stalled = new AbortController();
    const asking = patient.stoppedBy(stalled.signal).listBuckets();
    while (proxy.seen.length === 1) await new Promise((resolve) => setTimeout(resolve, 10));
    stalled.abort();
    await expect(asking).rejects.toMatchObject({ code: 'stopped' });
    // Stopped before it begins, a request is not sent at all.
    await expect(patient.stoppedBy(AbortSignal.abort()).listBuckets()).rejects.toMatchObject({
      code: 'stopped',
    });
    expect(proxy.seen).toHaveLength(2);
    // The client it was made from is not stopped.
    await expect(patient.listBuckets()).resolves.toBeInstanceOf(Array);
  });

  it('asks again when an answer breaks off part-way, but never repeats a POST the server took', async () => {
    proxy.randomFaults(0, 1);
    const names = ['cut-answer-one', 'cut-answer-two', 'cut-answer-three'];
    for (const name of names)
      await client().createBucket({
        name,
        type: 'backup',
        storageClass: 'hot',
        bucketKeyPem: ann.pem,
      });
    // The list is longer than the bytes the proxy lets through before it hangs up.
    proxy.seen.length = 0;
    proxy.schedule(['cut']);
    const listed = await client().listBuckets();
    expect(listed.map((bucket) => bucket.name)).toEqual(expect.arrayContaining(names));
    expect(proxy.seen).toHaveLength(2);

    // The server created the bucket before its answer broke off: sending it again would make
    // a conflict of the user's own request. The failure says what happened.
    proxy.seen.length = 0;
    proxy.schedule(['cut']);
    const failure = await client()
      .createBucket({
        name: 'created-but-cut-off-with-a-long-name',
        type: 'backup',
        storageClass: 'hot',
        bucketKeyPem: ann.pem,
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toMatchObject({ code: 'network', retryable: false });
    expect((failure as Error).message).toMatch(/broke part-way through an answer/);
    expect(proxy.seen).toHaveLength(1);
    expect((await client().listBuckets()).map((bucket) => bucket.name)).toContain(
      'created-but-cut-off-with-a-long-name',
    );
  });

  describe('blocks/car, whose answer streams', () => {
    async function storedBlock(name: string) {
      const block = await rawBlock();
      await storeVersion(service, ann, await createBucket(service, ann, name), null, [block]);
      return block;
    }

    async function bytesOf(answer: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
      const chunks: Uint8Array[] = [];
      for await (const chunk of answer) chunks.push(chunk);
      return Buffer.concat(chunks);
    }

    it('retries 500, resets and 503 and then streams the blocks', async () => {
      const block = await storedBlock('car-retries');
      proxy.seen.length = 0;
      proxy.schedule([{ status: 500 }, 'reset', { status: 503 }]);
      const answer = await client().blocksCar(proxy.url, [block.cid.toString()]);
      const car = await CarReader.fromBytes(await bytesOf(answer));
      expect((await car.get(block.cid))?.bytes).toEqual(block.bytes);
      expect(proxy.seen).toHaveLength(4);
    });

    it('fails a missing block at once as not_found', async () => {
      const missing = await rawBlock();
      proxy.seen.length = 0;
      await expect(client().blocksCar(proxy.url, [missing.cid.toString()])).rejects.toMatchObject({
        code: 'not_found',
      });
      expect(proxy.seen).toHaveLength(1);
    });

    it('reports an answer cut off part-way as a retryable network error', async () => {
      const block = await storedBlock('car-cut');
      proxy.schedule(['cut']);
      const answer = await client().blocksCar(proxy.url, [block.cid.toString()]);
      await expect(bytesOf(answer)).rejects.toMatchObject({ code: 'network', retryable: true });
    });
  });
});
