import type { ProtocolCid } from './cid.ts';
import {
  cidField,
  cidListField,
  cidTextListField,
  enumField,
  expectObject,
  fingerprintListField,
  integerField,
  nullableUuidField,
  pemField,
  stringField,
  textField,
  uuidField,
} from './field-rules.ts';
import type { P384PublicKey } from './p384-public-key.ts';
import { ValidationError } from './validation-error.ts';
import { BUCKET_TYPES, STORAGE_CLASSES, type BucketType, type StorageClass } from './resources.ts';

// Request bodies of §8–§11 as typed values. Each parser throws ValidationError (400).

export interface EnrollRequest {
  code: string;
  key: P384PublicKey;
  deviceName: string | null;
}

export function parseEnrollRequest(body: unknown): EnrollRequest {
  const record = expectObject(body, ['code', 'pem', 'device_name'], ['code', 'pem']);
  const code = stringField(record['code'], 'code', 256);
  const key = pemField(record['pem'], 'pem');
  const deviceName =
    record['device_name'] === undefined
      ? null
      : textField(record['device_name'], 'device_name', 1, 64);
  return { code, key, deviceName };
}

export interface DeviceKeyCreateRequest {
  key: P384PublicKey;
  name: string | null;
}

export function parseDeviceKeyCreateRequest(body: unknown): DeviceKeyCreateRequest {
  const record = expectObject(body, ['pem', 'name'], ['pem']);
  const key = pemField(record['pem'], 'pem');
  const name = record['name'] === undefined ? null : textField(record['name'], 'name', 1, 64);
  return { key, name };
}

export interface BucketCreateRequest {
  name: string;
  type: BucketType;
  storageClass: StorageClass;
  bucketKey: P384PublicKey;
}

export function parseBucketCreateRequest(body: unknown): BucketCreateRequest {
  const fields = ['name', 'type', 'storage_class', 'initial_bucket_key_pem'];
  const record = expectObject(body, fields, fields);
  return {
    name: textField(record['name'], 'name', 1, 64),
    type: enumField(record['type'], 'type', BUCKET_TYPES),
    storageClass: enumField(record['storage_class'], 'storage_class', STORAGE_CLASSES),
    bucketKey: pemField(record['initial_bucket_key_pem'], 'initial_bucket_key_pem'),
  };
}

export interface BucketUpdateRequest {
  name?: string;
  replicas?: number;
}

export function parseBucketUpdateRequest(body: unknown): BucketUpdateRequest {
  const record = expectObject(body, ['name', 'replicas'], []);
  if (Object.keys(record).length === 0) {
    throw new ValidationError('body', 'must change name or replicas');
  }
  const update: BucketUpdateRequest = {};
  if (record['name'] !== undefined) update.name = textField(record['name'], 'name', 1, 64);
  if (record['replicas'] !== undefined)
    update.replicas = integerField(record['replicas'], 'replicas', 1, 5);
  return update;
}

export interface PushRequestData {
  bucketId: string;
  rootCid: ProtocolCid;
  metadataCid: ProtocolCid;
  expectedDataSize: number;
  previousId: string | null;
  validKeys: string[];
  deletedBlockCids: ProtocolCid[];
}

export function parsePushRequestData(body: unknown, maxValidKeys: number): PushRequestData {
  const fields = [
    'bucket_id',
    'root_cid',
    'metadata_cid',
    'expected_data_size',
    'previous_id',
    'valid_keys',
    'deleted_block_cids',
  ];
  const record = expectObject(body, fields, fields, 'request-data');
  return {
    bucketId: uuidField(record['bucket_id'], 'bucket_id'),
    rootCid: cidField(record['root_cid'], 'root_cid'),
    metadataCid: cidField(record['metadata_cid'], 'metadata_cid'),
    expectedDataSize: integerField(
      record['expected_data_size'],
      'expected_data_size',
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    previousId: nullableUuidField(record['previous_id'], 'previous_id'),
    validKeys: fingerprintListField(record['valid_keys'], 'valid_keys', maxValidKeys),
    deletedBlockCids: cidListField(
      record['deleted_block_cids'],
      'deleted_block_cids',
      0,
      Number.MAX_SAFE_INTEGER,
    ),
  };
}

export function parseCidListBody(body: unknown, min: number, max: number): ProtocolCid[] {
  return cidListField(body, 'body', min, max);
}

/** parseCidListBody, giving the CIDs' text: no CID object is made (see isCidText). */
export function parseCidTextListBody(body: unknown, min: number, max: number): string[] {
  return cidTextListField(body, 'body', min, max);
}
