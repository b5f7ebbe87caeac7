// Resource shapes of §7, exactly as they travel. Every field is always present; unset is null.

export type BucketType = 'backup' | 'interactive';
export const BUCKET_TYPES: readonly BucketType[] = ['backup', 'interactive'];
export type StorageClass = 'hot' | 'warm' | 'cold';
export const STORAGE_CLASSES: readonly StorageClass[] = ['hot', 'warm', 'cold'];
export type VersionState = 'pending' | 'active' | 'outdated' | 'upload_failed';
export type SnapshotState = 'pending' | 'completed' | 'failed';
export type Severity = 'info' | 'warning' | 'error';
export const SEVERITIES: readonly Severity[] = ['info', 'warning', 'error'];
export type InvoiceStatus = 'draft' | 'open' | 'paid' | 'uncollectible' | 'void';
export const INVOICE_STATUSES: readonly InvoiceStatus[] = [
  'draft',
  'open',
  'paid',
  'uncollectible',
  'void',
];
export type AccountTaxClass = 'business' | 'personal' | 'not_applicable' | 'unspecified';
export const ACCOUNT_TAX_CLASSES: readonly AccountTaxClass[] = [
  'business',
  'personal',
  'not_applicable',
  'unspecified',
];

export interface DeviceKey {
  id: string;
  user_id: string;
  fingerprint: string;
  name: string | null;
  last_seen_at: number | null;
}

export interface Bucket {
  id: string;
  owner_id: string;
  name: string;
  type: BucketType;
  storage_class: StorageClass;
  updated_at: string;
  replicas: number;
  effective_replicas: number;
}

export interface BucketCreateResult {
  id: string;
  name: string;
  type: BucketType;
  storage_class: StorageClass;
  initial_bucket_key: { id: string; approved: true; fingerprint: string };
}

export interface Metadata {
  id: string;
  root_cid: string;
  metadata_cid: string;
  data_size: number;
  state: VersionState;
  created_at: number;
  updated_at: number;
  snapshot_id: string | null;
  bucket_id: string;
  previous_id: string | null;
}

export interface MetadataUploadResult {
  id: string;
  state: 'active' | 'pending';
  storage_host: string;
  storage_authorization: string;
}

export interface Snapshot {
  id: string;
  bucket_id: string;
  metadata_id: string;
  size: number;
  state: SnapshotState;
  created_at: number;
}

export interface User {
  id: string;
  email: string | null;
  display_name: string | null;
  locale: string | null;
  profile_image: string | null;
  accepted_tos_at: number | null;
  account_tax_class: AccountTaxClass;
  subscription_id: string | null;
  subscription_valid_until: string | null;
  monthly_egress: number;
}

export interface Invoice {
  id: string;
  billing_start: string;
  billing_end: string;
  subscription_id: string | null;
  total_amount: number;
  status: InvoiceStatus;
  created_at: string;
}

export interface Notification {
  id: string;
  user_id: string;
  dismissable: boolean;
  message: string;
  message_key: string;
  severity: Severity;
  created_at: number;
}

export interface EnrollResult {
  user_id: string;
  key_id: string;
  fingerprint: string;
}

export interface WhoAmI {
  user_id: string;
  key_id: string;
  fingerprint: string;
  email: string | null;
  storage_host: string;
}

export interface ShardUploadResult {
  blocks: number;
  bytes: number;
  received_total: number;
}

/** §6: the stable codes clients branch on. */
export type ServiceErrorCode =
  | 'invalid_request'
  | 'not_authorized'
  | 'not_found'
  | 'timeout'
  | 'conflict'
  | 'stale_previous'
  | 'payload_too_large'
  | 'quota_exceeded'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'internal';

export const STATUS_OF_CODE: Readonly<Record<ServiceErrorCode, number>> = {
  invalid_request: 400,
  not_authorized: 401,
  not_found: 404,
  timeout: 408,
  conflict: 409,
  stale_previous: 409,
  payload_too_large: 413,
  quota_exceeded: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
};

export interface ErrorBody {
  msg: string;
  code: ServiceErrorCode;
}
