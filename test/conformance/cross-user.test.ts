import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES } from '../../server/routes/index.ts';
import { postNotification, recordInvoice } from '../../server/admin.ts';
import { call } from '../helpers/http-client.ts';
import { rawBlock, shardOf } from '../helpers/cars.ts';
import { createBucket, enrolledDevice, push, storeVersion } from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// §18 item 21 and §16.1, generated from the route table: for every route that takes an id,
// user B naming user A's record gets 404 (401 where an SA names another version, §11.1), and
// B's lists never contain A's records. A route whose parameter has no fixture fails here.

let service: TestService;
let ann: TestDevice;
let bob: TestDevice;
const annIds: Record<string, string> = {};
let bobSa = '';
let bobVersion = '';

beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
  bob = await enrolledDevice(service, 'bob@example.org');
  const bucketId = await createBucket(service, ann, 'ann-photos');
  const block = await rawBlock();
  const versionId = await storeVersion(service, ann, bucketId, null, [block]);
  const snapshots = await call('GET', `${service.api}/buckets/${bucketId}/snapshots`, {
    token: ann.token(),
  });
  const invoiceStart = Date.parse('2026-10-01T00:00:00Z');
  annIds['bucket_id'] = bucketId;
  annIds['metadata_id'] = versionId;
  annIds['snapshot_id'] = snapshots.json[0].id;
  annIds['key_id'] = ann.keyId;
  annIds['cid'] = block.cid.toString();
  annIds['shard_cid'] = (await shardOf([block])).cid.toString();
  annIds['fingerprint'] = ann.fingerprint;
  annIds['invoice_id'] = recordInvoice(service.service.ctx, {
    email: 'ann@example.org',
    start: invoiceStart,
    end: invoiceStart + 1,
    amount: 1,
    status: 'paid',
    subscriptionId: null,
  });
  annIds['notification_id'] = postNotification(service.service.ctx, {
    email: 'ann@example.org',
    severity: 'info',
    message: 'hi',
    key: 'hi',
    sticky: false,
  });
  const bobBucket = await createBucket(service, bob, 'bob-photos');
  const pushed = await push(service, bob, {
    bucketId: bobBucket,
    expectedDataSize: 10,
    previousId: null,
  });
  bobSa = pushed.json.storage_authorization;
  bobVersion = pushed.json.id;
});
afterAll(async () => service.close());

// Routes whose parameter names something that is not a per-user record.
const PUBLIC_PARAMS = new Set(['fingerprint']);

describe('§18 cross-user matrix (from the route table)', () => {
  const idRoutes = ROUTES.filter(
    (route) =>
      route.url.includes(':') && !route.url.split('/').some((s) => PUBLIC_PARAMS.has(s.slice(1))),
  );
  it('covers every route that takes an id', () => {
    expect(idRoutes.length).toBeGreaterThanOrEqual(15);
  });
  for (const route of idRoutes) {
    it(`${route.method} ${route.url} as another user`, async () => {
      const url = route.url.replace(/:([a-z_]+)/g, (_match, name: string) => {
        const id = annIds[name];
        if (id === undefined) throw new Error(`no fixture for :${name}; add one to this matrix`);
        return id;
      });
      const token = route.auth === 'storage' ? bobSa : bob.token();
      const body =
        route.method === 'PUT' && route.auth === 'storage'
          ? (await shardOf([await rawBlock()])).car
          : undefined;
      const json =
        route.method === 'PUT' && route.auth === 'device'
          ? { replicas: 2 }
          : route.method === 'POST' || route.method === 'PATCH'
            ? {}
            : undefined;
      const response = await call(route.method, `${service.api}${url}`, {
        token,
        ...(body ? { body, contentType: 'application/vnd.ipld.car' } : {}),
        ...(json !== undefined && !body ? { json } : {}),
      });
      // An SA for another version is refused as unauthorized before any lookup (§11.1).
      const expected =
        route.auth === 'storage' && url.includes(annIds['metadata_id'] ?? '') ? 401 : 404;
      expect(response.status).toBe(expected);
      // And A's record is untouched.
      const still = await call('GET', `${service.api}/buckets/${annIds['bucket_id']}`, {
        token: ann.token(),
      });
      expect(still.json.replicas).toBe(1);
    });
  }

  it("B's lists never contain A's records", async () => {
    const lists = [
      '/buckets',
      '/buckets/metadata',
      '/auth/device_api_key',
      '/invoices',
      '/notifications',
    ];
    for (const path of lists) {
      const response = await call('GET', `${service.api}${path}`, { token: bob.token() });
      expect(response.status).toBe(200);
      const ids = new Set(Object.values(annIds));
      for (const record of response.json as Array<Record<string, unknown>>) {
        expect(ids.has(String(record['id']))).toBe(false);
        if ('user_id' in record) expect(record['user_id']).toBe(bob.userId);
        if ('owner_id' in record) expect(record['owner_id']).toBe(bob.userId);
      }
    }
    const filtered = await call(
      'GET',
      `${service.api}/buckets/metadata?bucket_id=${annIds['bucket_id']}`,
      { token: bob.token() },
    );
    expect(filtered.status).toBe(404);
    const missing = await call('POST', `${service.api}/blocks/missing`, {
      token: bobSa,
      json: [annIds['cid']],
    });
    expect(missing.json).toEqual([annIds['cid']]);
    expect(bobVersion).not.toBe(annIds['metadata_id']);
  });
});
