import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { call } from '../helpers/http-client.ts';
import { rawBlock } from '../helpers/cars.ts';
import { createBucket, enrolledDevice, push, uploadShard } from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// §18 item 36: the upload window, its sweep and the retention of failed uploads.

let service: TestService;
let ann: TestDevice;
beforeAll(async () => {
  service = await startTestService({
    uploadWindowMs: 2_000,
    sweepIntervalMs: 100,
    uploadFailedRetentionMs: 5_000,
  });
  ann = await enrolledDevice(service, 'ann@example.org');
});
afterAll(async () => service.close());

describe('§18 upload window', () => {
  it('36: a version pending past its window is upload_failed, the sweep notifies, retention deletes it', async () => {
    const bucketId = await createBucket(service, ann, 'w36');
    const pushed = await push(service, ann, { bucketId, expectedDataSize: 5000, previousId: null });
    const id = pushed.json.id as string;
    const sa = pushed.json.storage_authorization as string;
    const block = await rawBlock();
    expect((await uploadShard(service, sa, id, [block])).status).toBe(200);
    const pushedAt = (
      await call('GET', `${service.api}/buckets/metadata/${id}`, { token: ann.token() })
    ).json.created_at as number;
    service.advance(2_000);
    const failed = await call('GET', `${service.api}/buckets/metadata/${id}`, {
      token: ann.token(),
    });
    expect(failed.json).toMatchObject({ state: 'upload_failed', data_size: 5000 });
    expect(failed.json.updated_at).toBeGreaterThanOrEqual(pushedAt + 1);
    expect((await uploadShard(service, sa, id, [await rawBlock()])).status).toBe(409);
    expect(
      (await call('GET', `${service.api}/blocks/${block.cid.toString()}`, { token: ann.token() }))
        .status,
    ).toBe(404);
    await sleep(300);
    const notes = await call('GET', `${service.api}/notifications`, { token: ann.token() });
    expect(
      notes.json.filter((n: { message_key: string }) => n.message_key === 'upload_window_expired'),
    ).toHaveLength(1);
    expect(
      (await call('GET', `${service.api}/buckets/metadata/${id}/pull`, { token: ann.token() }))
        .status,
    ).toBe(200);
    service.advance(5_000);
    expect(
      (await call('GET', `${service.api}/buckets/metadata/${id}`, { token: ann.token() })).status,
    ).toBe(404);
  });
});
