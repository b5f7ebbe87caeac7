import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http-client.ts';
import { carBytes, cborBlock, metadataCar, multipartBody, rawBlock } from '../helpers/cars.ts';
import {
  complete,
  createBucket,
  enrolledDevice,
  push,
  storeVersion,
  uploadShard,
} from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, SMALL_LIMITS, type TestService } from '../helpers/test-service.ts';

// §18 items 26–31 and 35–38: pushes, the version state machine, pull.

let service: TestService;
let ann: TestDevice;
beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
});
afterAll(async () => service.close());

async function versionsOf(
  bucketId: string,
): Promise<Array<{ id: string; state: string; snapshot_id: string | null }>> {
  return (
    await call('GET', `${service.api}/buckets/metadata?bucket_id=${bucketId}`, {
      token: ann.token(),
    })
  ).json;
}

async function pushParts(parts: Parameters<typeof multipartBody>[0]) {
  const { body, contentType } = multipartBody(parts);
  return call('POST', `${service.api}/buckets/metadata`, { token: ann.token(), body, contentType });
}

describe('§18 pushes', () => {
  it('26: a push with expected_data_size 0 is active at once and outdates the previous active version', async () => {
    const bucketId = await createBucket(service, ann, 'v26');
    const first = await push(service, ann, { bucketId, expectedDataSize: 0, previousId: null });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({
      id: expect.any(String),
      state: 'active',
      storage_host: service.url,
      storage_authorization: expect.any(String),
    });
    const claims = JSON.parse(
      Buffer.from(
        (first.json.storage_authorization as string).split('.')[1] ?? '',
        'base64url',
      ).toString(),
    );
    expect(claims.max_bytes).toBe(0);
    expect(claims.aud).toBe('banyan-storage');
    const second = await push(service, ann, {
      bucketId,
      expectedDataSize: 0,
      previousId: first.json.id,
    });
    expect(second.json.state).toBe('active');
    const states = Object.fromEntries((await versionsOf(bucketId)).map((v) => [v.id, v.state]));
    expect(states).toEqual({ [first.json.id]: 'outdated', [second.json.id]: 'active' });
  });

  it('27: a push with data is pending, and data_size stays expected_data_size while pending', async () => {
    const bucketId = await createBucket(service, ann, 'v27');
    const block = await rawBlock();
    const pushed = await push(service, ann, { bucketId, expectedDataSize: 5000, previousId: null });
    expect(pushed.json.state).toBe('pending');
    const shard = await uploadShard(service, pushed.json.storage_authorization, pushed.json.id, [
      block,
    ]);
    expect(shard.json).toEqual({ blocks: 1, bytes: 1024, received_total: 1024 });
    const read = await call('GET', `${service.api}/buckets/metadata/${pushed.json.id}`, {
      token: ann.token(),
    });
    expect(read.json).toMatchObject({
      state: 'pending',
      data_size: 5000,
      bucket_id: bucketId,
      previous_id: null,
      snapshot_id: null,
    });
  });

  it('28: stale previous_id is 409 stale_previous at push and complete; losers stay pending and can be deleted', async () => {
    const bucketId = await createBucket(service, ann, 'v28');
    const a = await push(service, ann, { bucketId, expectedDataSize: 0, previousId: null });
    const stale = await push(service, ann, { bucketId, expectedDataSize: 0, previousId: null });
    expect(stale.status).toBe(409);
    expect(stale.json.code).toBe('stale_previous');
    expect((await versionsOf(bucketId)).length).toBe(1);
    const p1 = await push(service, ann, {
      bucketId,
      expectedDataSize: 1024,
      previousId: a.json.id,
    });
    const p2 = await push(service, ann, {
      bucketId,
      expectedDataSize: 1024,
      previousId: a.json.id,
    });
    await uploadShard(service, p1.json.storage_authorization, p1.json.id, [await rawBlock()]);
    await uploadShard(service, p2.json.storage_authorization, p2.json.id, [await rawBlock()]);
    expect((await complete(service, p2.json.storage_authorization, p2.json.id)).json.state).toBe(
      'active',
    );
    const lost = await complete(service, p1.json.storage_authorization, p1.json.id);
    expect(lost.status).toBe(409);
    expect(lost.json.code).toBe('stale_previous');
    expect(
      (await call('GET', `${service.api}/buckets/metadata/${p1.json.id}`, { token: ann.token() }))
        .json.state,
    ).toBe('pending');
    expect(
      (
        await call('DELETE', `${service.api}/buckets/metadata/${p1.json.id}`, {
          token: ann.token(),
        })
      ).status,
    ).toBe(204);
    const random = await push(service, ann, {
      bucketId,
      expectedDataSize: 0,
      previousId: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
    });
    expect(random.json.code).toBe('stale_previous');
  });

  it('29: parts missing or out of order are 400; oversized parts are 413 and the answer is readable', async () => {
    const bucketId = await createBucket(service, ann, 'v29');
    const metadata = await metadataCar();
    const requestData = JSON.stringify({
      bucket_id: bucketId,
      root_cid: metadata.root.toString(),
      metadata_cid: metadata.cid.toString(),
      expected_data_size: 0,
      previous_id: null,
      valid_keys: [],
      deleted_block_cids: [],
    });
    const reversed = await pushParts([
      { name: 'car-upload', contentType: 'application/vnd.ipld.car', body: metadata.car },
      { name: 'request-data', contentType: 'application/json', body: requestData },
    ]);
    expect(reversed.status).toBe(400);
    expect(reversed.json.msg).toMatch(/^request-data:/);
    const onlyData = await pushParts([
      { name: 'request-data', contentType: 'application/json', body: requestData },
    ]);
    expect(onlyData.status).toBe(400);
    expect(onlyData.json.msg).toMatch(/^car-upload:/);
    const extra = await pushParts([
      { name: 'request-data', body: requestData },
      { name: 'car-upload', body: metadata.car },
      { name: 'more', body: 'x' },
    ]);
    expect(extra.status).toBe(400);
    const wrongType = await pushParts([
      { name: 'request-data', contentType: 'application/xml', body: requestData },
      { name: 'car-upload', body: metadata.car },
    ]);
    expect(wrongType.status).toBe(400);
    const bigData = await pushParts([
      {
        name: 'request-data',
        contentType: 'application/json',
        body: `${requestData}${' '.repeat(SMALL_LIMITS.requestDataBytes)}`,
      },
      { name: 'car-upload', body: metadata.car },
    ]);
    expect(bigData.status).toBe(413);
    expect(bigData.json.code).toBe('payload_too_large');
    const bigCar = await pushParts([
      { name: 'request-data', body: requestData },
      { name: 'car-upload', body: new Uint8Array(SMALL_LIMITS.metadataCarBytes + 10) },
    ]);
    expect(bigCar.status).toBe(413);
    const notMultipart = await call('POST', `${service.api}/buckets/metadata`, {
      token: ann.token(),
      json: {},
    });
    expect(notMultipart.status).toBe(415);
    expect((await versionsOf(bucketId)).length).toBe(0);
    // The server is still healthy for the next request on a fresh connection.
    expect(
      (await push(service, ann, { bucketId, expectedDataSize: 0, previousId: null })).status,
    ).toBe(200);
  });

  it('30: a CAR whose first root is not metadata_cid, a lying block or a truncated CAR is 400', async () => {
    const bucketId = await createBucket(service, ann, 'v30');
    const metadata = await metadataCar();
    const other = await cborBlock({ other: true });
    const wrongRoot = await carBytes([other.cid], [other]);
    expect(
      (
        await push(service, ann, {
          bucketId,
          expectedDataSize: 0,
          previousId: null,
          car: wrongRoot,
          metadataCid: metadata.cid.toString(),
        })
      ).status,
    ).toBe(400);
    const lying = Buffer.from(metadata.car);
    lying[lying.length - 1] = (lying[lying.length - 1] ?? 0) ^ 0xff;
    const lyingResponse = await push(service, ann, {
      bucketId,
      expectedDataSize: 0,
      previousId: null,
      car: lying,
      metadataCid: metadata.cid.toString(),
    });
    expect(lyingResponse.status).toBe(400);
    expect(lyingResponse.json.msg).toMatch(/^car-upload:/);
    const truncated = metadata.car.subarray(0, metadata.car.length - 3);
    expect(
      (
        await push(service, ann, {
          bucketId,
          expectedDataSize: 0,
          previousId: null,
          car: truncated,
          metadataCid: metadata.cid.toString(),
        })
      ).status,
    ).toBe(400);
    const noRootBlock = await carBytes([metadata.cid], [other]);
    expect(
      (
        await push(service, ann, {
          bucketId,
          expectedDataSize: 0,
          previousId: null,
          car: noRootBlock,
          metadataCid: metadata.cid.toString(),
        })
      ).status,
    ).toBe(400);
    expect((await versionsOf(bucketId)).length).toBe(0);
  });

  it('31: a push over quota is 413 quota_exceeded; 80 % and 100 % crossings notify once each', async () => {
    const quota = 100_000;
    const carol = await enrolledDevice(service, 'carol@example.org', quota);
    const bucketId = await createBucket(service, carol, 'q');
    const keys = async (): Promise<string[]> =>
      (await call('GET', `${service.api}/notifications`, { token: carol.token() })).json.map(
        (n: { message_key: string }) => n.message_key,
      );
    const over = await push(service, carol, {
      bucketId,
      expectedDataSize: quota,
      previousId: null,
    });
    expect(over.status).toBe(413);
    expect(over.json.code).toBe('quota_exceeded');
    const p80 = await push(service, carol, {
      bucketId,
      expectedDataSize: 85_000,
      previousId: null,
    });
    expect(p80.status).toBe(200);
    expect((await keys()).filter((k) => k === 'storage_quota_80')).toHaveLength(1);
    // Reach exactly 100 %: the quota allows usage up to and including it.
    const carSize = (await metadataCar()).car.length;
    const toFull = quota - 85_000 - 2 * carSize;
    const p100 = await push(service, carol, {
      bucketId,
      expectedDataSize: toFull,
      previousId: null,
    });
    expect(p100.status).toBe(200);
    expect((await keys()).filter((k) => k === 'storage_quota_100')).toHaveLength(1);
    const sticky = (
      await call('GET', `${service.api}/notifications`, { token: carol.token() })
    ).json.find((n: { message_key: string }) => n.message_key === 'storage_quota_100');
    expect(sticky).toMatchObject({ severity: 'error', dismissable: false });
    expect(
      (await call('DELETE', `${service.api}/notifications/${sticky.id}`, { token: carol.token() }))
        .status,
    ).toBe(409);
    await call('DELETE', `${service.api}/buckets/metadata/${p100.json.id}`, {
      token: carol.token(),
    });
    expect(await keys()).not.toContain('storage_quota_100');
    const again = await push(service, carol, {
      bucketId,
      expectedDataSize: toFull,
      previousId: null,
    });
    expect(again.status).toBe(200);
    expect((await keys()).filter((k) => k === 'storage_quota_100')).toHaveLength(1);
    expect((await keys()).filter((k) => k === 'storage_quota_80')).toHaveLength(1);
  });
});

describe('§18 completion, deletion, pull', () => {
  it('35: complete activates with data_size = received_total; backup buckets get a completed snapshot', async () => {
    const bucketId = await createBucket(service, ann, 'v35');
    const blocks = [await rawBlock(), await rawBlock()];
    const pushed = await push(service, ann, { bucketId, expectedDataSize: 4096, previousId: null });
    await uploadShard(service, pushed.json.storage_authorization, pushed.json.id, blocks);
    const done = await complete(service, pushed.json.storage_authorization, pushed.json.id);
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({
      id: pushed.json.id,
      state: 'active',
      data_size: 2048,
      snapshot_id: expect.any(String),
    });
    const again = await complete(service, pushed.json.storage_authorization, pushed.json.id);
    expect(again.status).toBe(200);
    const snapshots = await call('GET', `${service.api}/buckets/${bucketId}/snapshots`, {
      token: ann.token(),
    });
    expect(snapshots.json).toEqual([
      {
        id: done.json.snapshot_id,
        bucket_id: bucketId,
        metadata_id: pushed.json.id,
        size: 2048,
        state: 'completed',
        created_at: expect.any(Number),
      },
    ]);
  });

  it("a version's block set is its parent's minus deleted_block_cids; unknown deletions are ignored", async () => {
    const bucketId = await createBucket(service, ann, 'inherit');
    const [kept, dropped, stranger] = [await rawBlock(), await rawBlock(), await rawBlock()];
    const v1 = await storeVersion(service, ann, bucketId, null, [kept, dropped]);
    const pushFrom = async (previousId: string, deleted: string[]) => {
      const pushed = await push(service, ann, {
        bucketId,
        expectedDataSize: 0,
        previousId,
        deletedBlockCids: deleted,
      });
      expect(pushed.json.state).toBe('active');
      return pushed.json.id as string;
    };
    const v2 = await pushFrom(v1, [dropped.cid.toString(), stranger.cid.toString()]);
    const v3 = await pushFrom(v2, []);
    // A backup bucket snapshots each version as it is activated; its size is the block set's.
    const snapshots = await call('GET', `${service.api}/buckets/${bucketId}/snapshots`, {
      token: ann.token(),
    });
    const sizes = new Map(
      (snapshots.json as Array<{ metadata_id: string; size: number }>).map((snapshot) => [
        snapshot.metadata_id,
        snapshot.size,
      ]),
    );
    expect([sizes.get(v1), sizes.get(v2), sizes.get(v3)]).toEqual([2048, 1024, 1024]);
  });

  it('37: deleting the active version promotes the last outdated one; snapshotted versions are 409; twice is 404', async () => {
    const bucketId = await createBucket(service, ann, 'v37', 'interactive');
    const v1 = await storeVersion(service, ann, bucketId, null, [await rawBlock()]);
    const v2 = await storeVersion(service, ann, bucketId, v1, [await rawBlock()]);
    const v3 = await storeVersion(service, ann, bucketId, v2, [await rawBlock()]);
    const snap = await call('POST', `${service.api}/buckets/metadata/${v1}/snapshot`, {
      token: ann.token(),
    });
    expect(snap.status).toBe(200);
    expect(
      (await call('DELETE', `${service.api}/buckets/metadata/${v1}`, { token: ann.token() }))
        .status,
    ).toBe(409);
    expect(
      (await call('DELETE', `${service.api}/buckets/metadata/${v3}`, { token: ann.token() }))
        .status,
    ).toBe(204);
    expect(
      (await call('DELETE', `${service.api}/buckets/metadata/${v3}`, { token: ann.token() }))
        .status,
    ).toBe(404);
    const states = Object.fromEntries((await versionsOf(bucketId)).map((v) => [v.id, v.state]));
    expect(states).toEqual({ [v1]: 'outdated', [v2]: 'active' });
    // The next push builds on the promoted version.
    expect(
      (await push(service, ann, { bucketId, expectedDataSize: 0, previousId: v2 })).status,
    ).toBe(200);
  });

  it('37: in a backup bucket a promoted version gets a snapshot if it has none', async () => {
    const bucketId = await createBucket(service, ann, 'v37b');
    const v1 = await storeVersion(service, ann, bucketId, null, [await rawBlock()]);
    const v2 = await storeVersion(service, ann, bucketId, v1, [await rawBlock()]);
    const v1Read = await call('GET', `${service.api}/buckets/metadata/${v1}`, {
      token: ann.token(),
    });
    await call(
      'DELETE',
      `${service.api}/buckets/${bucketId}/snapshots/${v1Read.json.snapshot_id}`,
      { token: ann.token() },
    );
    const v2Read = await call('GET', `${service.api}/buckets/metadata/${v2}`, {
      token: ann.token(),
    });
    await call(
      'DELETE',
      `${service.api}/buckets/${bucketId}/snapshots/${v2Read.json.snapshot_id}`,
      { token: ann.token() },
    );
    expect(
      (await call('DELETE', `${service.api}/buckets/metadata/${v2}`, { token: ann.token() }))
        .status,
    ).toBe(204);
    const promoted = await call('GET', `${service.api}/buckets/metadata/${v1}`, {
      token: ann.token(),
    });
    expect(promoted.json.state).toBe('active');
    expect(promoted.json.snapshot_id).toEqual(expect.any(String));
  });

  it('pruning keeps the five most recently active outdated versions without a snapshot', async () => {
    const bucketId = await createBucket(service, ann, 'prune', 'interactive');
    const ids: string[] = [];
    let previous: string | null = null;
    for (let i = 0; i < 8; i += 1) {
      const pushed = await push(service, ann, {
        bucketId,
        expectedDataSize: 0,
        previousId: previous,
      });
      previous = pushed.json.id as string;
      ids.push(previous);
    }
    const remaining = (await versionsOf(bucketId)).map((v) => v.id);
    expect(remaining).toEqual(ids.slice(2).reverse());
  });

  it('38: pull returns the pushed bytes unchanged as application/vnd.ipld.car', async () => {
    const bucketId = await createBucket(service, ann, 'v38');
    const metadata = await metadataCar();
    const pushed = await push(service, ann, {
      bucketId,
      expectedDataSize: 0,
      previousId: null,
      car: metadata.car,
      metadataCid: metadata.cid.toString(),
    });
    const pulled = await call('GET', `${service.api}/buckets/metadata/${pushed.json.id}/pull`, {
      token: ann.token(),
    });
    expect(pulled.status).toBe(200);
    expect(pulled.headers.get('content-type')).toBe('application/vnd.ipld.car');
    expect(Buffer.from(pulled.bytes).equals(Buffer.from(metadata.car))).toBe(true);
  });
});
