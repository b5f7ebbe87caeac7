import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http-client.ts';
import { rawBlock } from '../helpers/cars.ts';
import { createBucket, enrolledDevice, push, storeVersion } from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { postNotification, recordInvoice } from '../../server/admin.ts';

// §18 items 40–43.

let service: TestService;
let ann: TestDevice;
beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
});
afterAll(async () => service.close());

describe('§18 snapshots', () => {
  it('40: an explicit snapshot of an interactive version is 200 once, 409 again, 409 pending, 404 deleted', async () => {
    const bucketId = await createBucket(service, ann, 'i40', 'interactive');
    const v1 = await storeVersion(service, ann, bucketId, null, [await rawBlock()]);
    const url = (id: string) => `${service.api}/buckets/metadata/${id}/snapshot`;
    const first = await call('POST', url(v1), { token: ann.token() });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({
      id: expect.any(String),
      bucket_id: bucketId,
      metadata_id: v1,
      size: 1024,
      state: 'completed',
      created_at: expect.any(Number),
    });
    expect((await call('POST', url(v1), { token: ann.token() })).status).toBe(409);
    const pendingVersion = await push(service, ann, {
      bucketId,
      expectedDataSize: 10,
      previousId: v1,
    });
    expect((await call('POST', url(pendingVersion.json.id), { token: ann.token() })).status).toBe(
      409,
    );
    await call('DELETE', `${service.api}/buckets/metadata/${pendingVersion.json.id}`, {
      token: ann.token(),
    });
    expect((await call('POST', url(pendingVersion.json.id), { token: ann.token() })).status).toBe(
      404,
    );
  });

  it('41: snapshot lists are newest first, size is the block-set bytes, and a foreign bucket path is 404', async () => {
    const bucketId = await createBucket(service, ann, 'b41');
    const otherBucket = await createBucket(service, ann, 'b41-other');
    const shared = await rawBlock();
    const v1 = await storeVersion(service, ann, bucketId, null, [shared]);
    const v2 = await storeVersion(service, ann, bucketId, v1, [
      await rawBlock(new Uint8Array(500)),
    ]);
    const list = await call('GET', `${service.api}/buckets/${bucketId}/snapshots`, {
      token: ann.token(),
    });
    expect(list.json.map((s: { metadata_id: string }) => s.metadata_id)).toEqual([v2, v1]);
    expect(list.json.map((s: { size: number }) => s.size)).toEqual([1524, 1024]);
    const snapshotId = list.json[0].id as string;
    expect(
      (
        await call('GET', `${service.api}/buckets/${bucketId}/snapshots/${snapshotId}`, {
          token: ann.token(),
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await call('GET', `${service.api}/buckets/${otherBucket}/snapshots/${snapshotId}`, {
          token: ann.token(),
        })
      ).status,
    ).toBe(404);
  });

  it('deleting a snapshot unpins its version; the active version stays active', async () => {
    const bucketId = await createBucket(service, ann, 'snapdel');
    const v1 = await storeVersion(service, ann, bucketId, null, [await rawBlock()]);
    const read = await call('GET', `${service.api}/buckets/metadata/${v1}`, { token: ann.token() });
    const snapshotUrl = `${service.api}/buckets/${bucketId}/snapshots/${read.json.snapshot_id}`;
    expect((await call('DELETE', snapshotUrl, { token: ann.token() })).status).toBe(204);
    expect((await call('GET', snapshotUrl, { token: ann.token() })).status).toBe(404);
    const after = await call('GET', `${service.api}/buckets/metadata/${v1}`, {
      token: ann.token(),
    });
    expect(after.json).toMatchObject({ state: 'active', snapshot_id: null });
    expect(
      (await call('DELETE', `${service.api}/buckets/metadata/${v1}`, { token: ann.token() }))
        .status,
    ).toBe(204);
  });
});

describe('§18 user, invoices and notifications', () => {
  it('42: PATCH /users/current validates writable fields, refuses read-only changes and is atomic', async () => {
    const url = `${service.api}/users/current`;
    const before = await call('GET', url, { token: ann.token() });
    expect(before.json).toEqual({
      id: ann.userId,
      email: 'ann@example.org',
      display_name: null,
      locale: null,
      profile_image: null,
      accepted_tos_at: null,
      account_tax_class: 'unspecified',
      subscription_id: null,
      subscription_valid_until: null,
      monthly_egress: 0,
    });
    const patch = (json: unknown) => call('PATCH', url, { token: ann.token(), json });
    const readOnly = await patch({ email: 'mallory@example.org' });
    expect(readOnly.status).toBe(400);
    expect(readOnly.json.msg).toBe('email: read-only');
    expect((await patch({})).status).toBe(400);
    expect((await patch({ role: 'admin' })).json.msg).toBe('role: unknown field');
    expect((await patch({ locale: 'not a locale!' })).status).toBe(400);
    expect((await patch({ profile_image: 'http://insecure.example/x.png' })).status).toBe(400);
    expect((await patch({ profile_image: 'data:image/png;base64,abc' })).status).toBe(400);
    const now = Math.floor(Date.now() / 1000);
    expect((await patch({ accepted_tos_at: now + 3600 })).status).toBe(400);
    // Atomic: one bad field and nothing changes.
    expect((await patch({ display_name: 'Ann', locale: 'not a locale!' })).status).toBe(400);
    expect((await call('GET', url, { token: ann.token() })).json.display_name).toBeNull();
    const ok = await patch({
      ...before.json,
      display_name: '  Ann  ',
      locale: 'en-gb',
      accepted_tos_at: now,
      account_tax_class: 'personal',
      profile_image: 'data:image/png;base64,iVBORw0KGgo=',
    });
    expect(ok.status).toBe(204);
    const after = await call('GET', url, { token: ann.token() });
    expect(after.json).toMatchObject({
      display_name: 'Ann',
      locale: 'en-GB',
      accepted_tos_at: now,
      account_tax_class: 'personal',
    });
    expect((await patch(after.json)).status).toBe(204);
    expect((await patch({ accepted_tos_at: now - 10 })).status).toBe(400);
    const withdrawn = await patch({ accepted_tos_at: null });
    expect(withdrawn.status).toBe(400);
    expect(withdrawn.json.msg).toMatch(/^accepted_tos_at:/);
    expect((await patch({ display_name: null })).status).toBe(204);
  });

  it('43: invoices and notifications are newest first; non-dismissable notifications cannot be deleted', async () => {
    const start = Date.parse('2026-09-01T00:00:00Z');
    const first = recordInvoice(service.service.ctx, {
      email: 'ann@example.org',
      start,
      end: start + 1000,
      amount: 100,
      status: 'paid',
      subscriptionId: null,
    });
    const second = recordInvoice(service.service.ctx, {
      email: 'ann@example.org',
      start,
      end: start + 1000,
      amount: 200,
      status: 'open',
      subscriptionId: 'team',
    });
    const invoices = await call('GET', `${service.api}/invoices`, { token: ann.token() });
    expect(invoices.json.map((i: { id: string }) => i.id)).toEqual([second, first]);
    expect(invoices.json[0]).toEqual({
      id: second,
      billing_start: '2026-09-01T00:00:00Z',
      billing_end: '2026-09-01T00:00:01Z',
      subscription_id: 'team',
      total_amount: 200,
      status: 'open',
      created_at: expect.stringMatching(/Z$/),
    });
    expect(
      (await call('GET', `${service.api}/invoices/${first}`, { token: ann.token() })).json
        .total_amount,
    ).toBe(100);
    const sticky = postNotification(service.service.ctx, {
      email: 'ann@example.org',
      severity: 'warning',
      message: 'Maintenance',
      key: 'maintenance',
      sticky: true,
    });
    const plain = postNotification(service.service.ctx, {
      email: 'ann@example.org',
      severity: 'info',
      message: 'Hello',
      key: 'hello',
      sticky: false,
    });
    const notes = await call('GET', `${service.api}/notifications`, { token: ann.token() });
    expect(notes.json.slice(0, 2).map((n: { id: string }) => n.id)).toEqual([plain, sticky]);
    expect(
      (await call('DELETE', `${service.api}/notifications/${sticky}`, { token: ann.token() }))
        .status,
    ).toBe(409);
    expect(
      (await call('DELETE', `${service.api}/notifications/${plain}`, { token: ann.token() }))
        .status,
    ).toBe(204);
    expect(
      (await call('DELETE', `${service.api}/notifications/${plain}`, { token: ann.token() }))
        .status,
    ).toBe(404);
  });
});
