import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http-client.ts';
import { createBucket, enrolledDevice, newPem, push, storeVersion } from '../helpers/flows.ts';
import { rawBlock } from '../helpers/cars.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// §18 items 22–25.

let service: TestService;
let ann: TestDevice;
let bob: TestDevice;
beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
  bob = await enrolledDevice(service, 'bob@example.org');
});
afterAll(async () => service.close());

async function create(device: TestDevice, json: Record<string, unknown>) {
  return call('POST', `${service.api}/buckets`, {
    token: device.token(),
    json: { type: 'backup', storage_class: 'hot', initial_bucket_key_pem: newPem(), ...json },
  });
}

describe('§18 buckets', () => {
  it('22: bucket create validates name, type, class and PEM; duplicates are per user', async () => {
    for (const name of ['', '   ', 'x'.repeat(65), 'tab\there', 'bell\u0007']) {
      const response = await create(ann, { name });
      expect(response.status).toBe(400);
      expect(response.json.msg).toMatch(/^name:/);
    }
    expect((await create(ann, { name: 'ok', type: 'archive' })).json.msg).toMatch(/^type:/);
    expect((await create(ann, { name: 'ok', storage_class: 'glacier' })).json.msg).toMatch(
      /^storage_class:/,
    );
    expect((await create(ann, { name: 'ok', initial_bucket_key_pem: 'nope' })).json.msg).toMatch(
      /^initial_bucket_key_pem:/,
    );
    expect((await create(ann, { name: 7 })).status).toBe(400);
    const astral = '😀'.repeat(64);
    const created = await create(ann, { name: `  ${astral}\u00a0` });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({
      id: expect.any(String),
      name: astral,
      type: 'backup',
      storage_class: 'hot',
      initial_bucket_key: {
        id: expect.any(String),
        approved: true,
        fingerprint: expect.stringMatching(/^[0-9a-f]{40}$/),
      },
    });
    expect((await create(ann, { name: 'Photos' })).status).toBe(200);
    const duplicate = await create(ann, { name: 'Photos' });
    expect(duplicate.status).toBe(409);
    expect(duplicate.json.code).toBe('conflict');
    expect((await create(ann, { name: 'photos' })).status).toBe(200);
    expect((await create(bob, { name: 'Photos' })).status).toBe(200);
  });

  it('23: GET /buckets orders by UTF-8 bytes of the name and omits deleted buckets', async () => {
    const carol = await enrolledDevice(service, 'carol@example.org');
    // UTF-16 order would put U+FF5E before U+1F600; UTF-8 bytes put the emoji last.
    const names = ['b', 'B', 'é', 'e\u0301', '\uff5e', '😀', 'a'];
    for (const name of names) await create(carol, { name });
    const gone = await create(carol, { name: 'deleted' });
    await call('DELETE', `${service.api}/buckets/${gone.json.id}`, { token: carol.token() });
    const listed = await call('GET', `${service.api}/buckets`, { token: carol.token() });
    const expected = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect(listed.json.map((bucket: { name: string }) => bucket.name)).toEqual(expected);
    expect(listed.json[0]).toEqual({
      id: expect.any(String),
      owner_id: carol.userId,
      name: 'B',
      type: 'backup',
      storage_class: 'hot',
      updated_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/),
      replicas: 1,
      effective_replicas: 1,
    });
  });

  it('24: PUT /buckets/{id} validates and applies name and replicas', async () => {
    const id = await createBucket(service, ann, 'put-test');
    const url = `${service.api}/buckets/${id}`;
    expect((await call('PUT', url, { token: ann.token(), json: {} })).status).toBe(400);
    expect((await call('PUT', url, { token: ann.token(), json: { replicas: 0 } })).status).toBe(
      400,
    );
    expect((await call('PUT', url, { token: ann.token(), json: { replicas: 6 } })).status).toBe(
      400,
    );
    expect(
      (await call('PUT', url, { token: ann.token(), json: { owner_id: bob.userId } })).json.msg,
    ).toMatch(/^owner_id:/);
    expect((await call('PUT', url, { token: ann.token(), json: { name: 'Photos' } })).status).toBe(
      409,
    );
    expect(
      (await call('PUT', url, { token: ann.token(), json: { replicas: 3, name: 'renamed' } }))
        .status,
    ).toBe(204);
    const read = await call('GET', url, { token: ann.token() });
    expect(read.json).toMatchObject({ name: 'renamed', replicas: 3, effective_replicas: 1 });
    expect(
      (await call('PUT', `${service.api}/buckets/not-a-uuid`, { token: ann.token(), json: {} }))
        .status,
    ).toBe(400);
    expect(
      (
        await call('PUT', `${service.api}/buckets/not-a-uuid`, {
          token: ann.token(),
          json: { replicas: 2 },
        })
      ).status,
    ).toBe(404);
  });

  it('25: after DELETE the bucket, its versions and snapshots are 404 and the name is free', async () => {
    const id = await createBucket(service, ann, 'doomed');
    const versionId = await storeVersion(service, ann, id, null, [await rawBlock()]);
    const snapshots = await call('GET', `${service.api}/buckets/${id}/snapshots`, {
      token: ann.token(),
    });
    const snapshotId = snapshots.json[0].id as string;
    expect(
      (await call('DELETE', `${service.api}/buckets/${id}`, { token: ann.token() })).status,
    ).toBe(204);
    expect((await call('GET', `${service.api}/buckets/${id}`, { token: ann.token() })).status).toBe(
      404,
    );
    expect(
      (await call('GET', `${service.api}/buckets/metadata/${versionId}`, { token: ann.token() }))
        .status,
    ).toBe(404);
    expect(
      (
        await call('GET', `${service.api}/buckets/${id}/snapshots/${snapshotId}`, {
          token: ann.token(),
        })
      ).status,
    ).toBe(404);
    expect(
      (await call('GET', `${service.api}/buckets/metadata`, { token: ann.token() })).json.map(
        (v: { id: string }) => v.id,
      ),
    ).not.toContain(versionId);
    expect(
      (await call('DELETE', `${service.api}/buckets/${id}`, { token: ann.token() })).status,
    ).toBe(404);
    const notes = await call('GET', `${service.api}/notifications`, { token: ann.token() });
    expect(notes.json[0]).toMatchObject({
      message_key: 'bucket_deleted',
      severity: 'info',
      dismissable: true,
    });
    expect((await create(ann, { name: 'doomed' })).status).toBe(200);
  });

  it("25: uploads to a deleted bucket's pending version get 404", async () => {
    const id = await createBucket(service, ann, 'pending-doomed');
    const pushed = await push(service, ann, {
      bucketId: id,
      expectedDataSize: 100,
      previousId: null,
    });
    await call('DELETE', `${service.api}/buckets/${id}`, { token: ann.token() });
    const block = await rawBlock();
    const { uploadShard } = await import('../helpers/flows.ts');
    const shard = await uploadShard(
      service,
      pushed.json.storage_authorization as string,
      pushed.json.id as string,
      [block],
    );
    expect(shard.status).toBe(404);
  });
});
