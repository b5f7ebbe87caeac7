import { generateKeyPairSync } from 'node:crypto';
import type { CID } from 'multiformats/cid';
import { call, type TestResponse } from './http-client.ts';
import { metadataCar, multipartBody, shardOf, type Block } from './cars.ts';
import { TestDevice } from './test-device.ts';
import type { TestService } from './test-service.ts';

// The usual sequences of requests, so each test states only what it is about.

/** Where the service answers; a TestService or a `canopy-server` process will do. */
export interface ServiceEndpoint {
  readonly api: string;
}

export function newPem(): string {
  return generateKeyPairSync('ec', { namedCurve: 'P-384' })
    .publicKey.export({ type: 'spki', format: 'pem' })
    .toString();
}

export async function enrolledDevice(
  service: TestService,
  email: string,
  quota: number | null = null,
): Promise<TestDevice> {
  const { code } = service.addUser(email, quota);
  const device = new TestDevice();
  const response = await call('POST', `${service.api}/auth/enroll`, {
    json: { code, pem: device.pem, device_name: 'test' },
  });
  if (response.status !== 200)
    throw new Error(`enroll failed: ${response.status} ${response.text}`);
  device.userId = response.json.user_id as string;
  device.keyId = response.json.key_id as string;
  return device;
}

export async function createBucket(
  service: ServiceEndpoint,
  device: TestDevice,
  name: string,
  type: 'backup' | 'interactive' = 'backup',
): Promise<string> {
  const response = await call('POST', `${service.api}/buckets`, {
    token: device.token(),
    json: { name, type, storage_class: 'hot', initial_bucket_key_pem: newPem() },
  });
  if (response.status !== 200)
    throw new Error(`bucket create failed: ${response.status} ${response.text}`);
  return response.json.id as string;
}

export interface PushInput {
  bucketId: string;
  expectedDataSize: number;
  previousId: string | null;
  deletedBlockCids?: string[];
  metadataCid?: string;
  car?: Uint8Array;
}

export async function push(
  service: ServiceEndpoint,
  device: TestDevice,
  input: PushInput,
): Promise<TestResponse> {
  const metadata = await metadataCar();
  const requestData = {
    bucket_id: input.bucketId,
    root_cid: metadata.root.toString(),
    metadata_cid: input.metadataCid ?? metadata.cid.toString(),
    expected_data_size: input.expectedDataSize,
    previous_id: input.previousId,
    valid_keys: [],
    deleted_block_cids: input.deletedBlockCids ?? [],
  };
  const { body, contentType } = multipartBody([
    { name: 'request-data', contentType: 'application/json', body: JSON.stringify(requestData) },
    {
      name: 'car-upload',
      contentType: 'application/vnd.ipld.car',
      body: input.car ?? metadata.car,
    },
  ]);
  return call('POST', `${service.api}/buckets/metadata`, {
    token: device.token(),
    body,
    contentType,
  });
}

export async function uploadShard(
  service: ServiceEndpoint,
  sa: string,
  versionId: string,
  blocks: readonly Block[],
): Promise<TestResponse & { shardCid: CID }> {
  const shard = await shardOf(blocks);
  const response = await call('PUT', `${service.api}/upload/${versionId}/${shard.cid.toString()}`, {
    token: sa,
    body: shard.car,
    contentType: 'application/vnd.ipld.car',
  });
  return { ...response, shardCid: shard.cid };
}

export async function complete(
  service: ServiceEndpoint,
  sa: string,
  versionId: string,
): Promise<TestResponse> {
  return call('POST', `${service.api}/upload/${versionId}/complete`, { token: sa });
}

/** Push, upload the blocks in one shard, complete. Returns the version id. */
export async function storeVersion(
  service: ServiceEndpoint,
  device: TestDevice,
  bucketId: string,
  previousId: string | null,
  blocks: readonly Block[],
): Promise<string> {
  const size = blocks.reduce((total, block) => total + block.bytes.length, 0);
  const pushed = await push(service, device, { bucketId, expectedDataSize: size, previousId });
  if (pushed.status !== 200) throw new Error(`push failed: ${pushed.status} ${pushed.text}`);
  const id = pushed.json.id as string;
  if (size > 0) {
    const sa = pushed.json.storage_authorization as string;
    const shard = await uploadShard(service, sa, id, blocks);
    if (shard.status !== 200) throw new Error(`shard failed: ${shard.status} ${shard.text}`);
    const done = await complete(service, sa, id);
    if (done.status !== 200) throw new Error(`complete failed: ${done.status} ${done.text}`);
  }
  return id;
}
