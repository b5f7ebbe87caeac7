import { EngineError } from '../api/index.ts';
import type {
  Bucket,
  BucketCreateResult,
  DeviceKey,
  EnrollResult,
  Invoice,
  Metadata,
  MetadataUploadResult,
  Notification,
  ShardUploadResult,
  Snapshot,
  User,
  WhoAmI,
} from '../protocol/index.ts';

// Checks of response bodies against the shapes of §7. Known fields must have their types;
// unknown fields are ignored (§2.9), so a newer server never breaks an older client.

type FieldType = 'string' | 'number' | 'boolean' | 'string|null' | 'number|null' | 'object';
type Shape = Readonly<Record<string, FieldType>>;

function matches(value: unknown, type: FieldType): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'string|null':
      return value === null || typeof value === 'string';
    case 'number|null':
      return value === null || (typeof value === 'number' && Number.isFinite(value));
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    default: {
      const unreachable: never = type;
      return unreachable;
    }
  }
}

function checkShape<T>(value: unknown, shape: Shape, what: string): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new EngineError('protocol', `the server sent a malformed ${what}`);
  }
  const record = value as Record<string, unknown>;
  for (const [field, type] of Object.entries(shape)) {
    if (!matches(record[field], type)) {
      throw new EngineError('protocol', `the server sent a ${what} whose ${field} is not ${type}`);
    }
  }
  return value as T;
}

function one<T>(shape: Shape, what: string): (value: unknown) => T {
  return (value) => checkShape<T>(value, shape, what);
}

function list<T>(shape: Shape, what: string): (value: unknown) => T[] {
  return (value) => {
    if (!Array.isArray(value))
      throw new EngineError('protocol', `the server sent a malformed ${what} list`);
    return value.map((item) => checkShape<T>(item, shape, what));
  };
}

const DEVICE_KEY: Shape = {
  id: 'string',
  user_id: 'string',
  fingerprint: 'string',
  name: 'string|null',
  last_seen_at: 'number|null',
};
const BUCKET: Shape = {
  id: 'string',
  owner_id: 'string',
  name: 'string',
  type: 'string',
  storage_class: 'string',
  updated_at: 'string',
  replicas: 'number',
  effective_replicas: 'number',
};
const METADATA: Shape = {
  id: 'string',
  root_cid: 'string',
  metadata_cid: 'string',
  data_size: 'number',
  state: 'string',
  created_at: 'number',
  updated_at: 'number',
  snapshot_id: 'string|null',
  bucket_id: 'string',
  previous_id: 'string|null',
};
const SNAPSHOT: Shape = {
  id: 'string',
  bucket_id: 'string',
  metadata_id: 'string',
  size: 'number',
  state: 'string',
  created_at: 'number',
};
const INVOICE: Shape = {
  id: 'string',
  billing_start: 'string',
  billing_end: 'string',
  subscription_id: 'string|null',
  total_amount: 'number',
  status: 'string',
  created_at: 'string',
};
const NOTIFICATION: Shape = {
  id: 'string',
  user_id: 'string',
  dismissable: 'boolean',
  message: 'string',
  message_key: 'string',
  severity: 'string',
  created_at: 'number',
};

export const parse = {
  enrollResult: one<EnrollResult>(
    { user_id: 'string', key_id: 'string', fingerprint: 'string' },
    'enrollment result',
  ),
  enrollmentCode: one<{ code: string; expires_at: number }>(
    { code: 'string', expires_at: 'number' },
    'enrollment code',
  ),
  deviceKey: one<DeviceKey>(DEVICE_KEY, 'device key'),
  deviceKeys: list<DeviceKey>(DEVICE_KEY, 'device key'),
  addedKey: one<{ id: string; fingerprint: string }>(
    { id: 'string', fingerprint: 'string' },
    'device key',
  ),
  regwait: one<{ user_id: string }>({ user_id: 'string' }, 'registration'),
  whoAmI: one<WhoAmI>(
    {
      user_id: 'string',
      key_id: 'string',
      fingerprint: 'string',
      email: 'string|null',
      storage_host: 'string',
    },
    'who_am_i answer',
  ),
  bucket: one<Bucket>(BUCKET, 'bucket'),
  buckets: list<Bucket>(BUCKET, 'bucket'),
  bucketCreated: one<BucketCreateResult>(
    {
      id: 'string',
      name: 'string',
      type: 'string',
      storage_class: 'string',
      initial_bucket_key: 'object',
    },
    'bucket creation result',
  ),
  metadata: one<Metadata>(METADATA, 'version'),
  metadataList: list<Metadata>(METADATA, 'version'),
  uploadResult: one<MetadataUploadResult>(
    { id: 'string', state: 'string', storage_host: 'string', storage_authorization: 'string' },
    'push result',
  ),
  snapshot: one<Snapshot>(SNAPSHOT, 'snapshot'),
  snapshots: list<Snapshot>(SNAPSHOT, 'snapshot'),
  user: one<User>(
    {
      id: 'string',
      email: 'string|null',
      display_name: 'string|null',
      locale: 'string|null',
      profile_image: 'string|null',
      accepted_tos_at: 'number|null',
      account_tax_class: 'string',
      subscription_id: 'string|null',
      subscription_valid_until: 'string|null',
      monthly_egress: 'number',
    },
    'user',
  ),
  invoice: one<Invoice>(INVOICE, 'invoice'),
  invoices: list<Invoice>(INVOICE, 'invoice'),
  notifications: list<Notification>(NOTIFICATION, 'notification'),
  shardResult: one<ShardUploadResult>(
    { blocks: 'number', bytes: 'number', received_total: 'number' },
    'shard result',
  ),
  cidList: (value: unknown): string[] => {
    if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
      throw new EngineError('protocol', 'the server sent a malformed CID list');
    }
    return value;
  },
};
