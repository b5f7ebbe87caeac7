import type { KeyObject } from 'node:crypto';
import {
  hasExactlyKeys,
  isIntegerSeconds,
  randomNonce,
  signCompactJws,
  type DecodedJws,
} from './compact-jws.ts';
import { timesAreValid } from './device-jwt.ts';
import { isFingerprint, isUuid } from './ids.ts';

// Storage authorizations (§11.1): a JWS in the device-JWT shape, signed by the service's key.

export const STORAGE_AUDIENCE = 'banyan-storage';
const CLAIM_KEYS = [
  'iat',
  'nbf',
  'exp',
  'aud',
  'sub',
  'nonce',
  'metadata_id',
  'bucket_id',
  'max_bytes',
  'device',
] as const;

export interface StorageClaims {
  readonly iat: number;
  readonly nbf: number;
  readonly exp: number;
  readonly aud: string;
  readonly sub: string;
  readonly nonce: string;
  readonly metadata_id: string;
  readonly bucket_id: string;
  readonly max_bytes: number;
  readonly device: string;
}

export function checkStorageClaims(
  token: DecodedJws,
  nowSeconds: number,
  leewaySeconds: number,
  uploadWindowSeconds: number,
): StorageClaims | undefined {
  const { claims } = token;
  if (!hasExactlyKeys(claims, CLAIM_KEYS)) return undefined;
  const { iat, nbf, exp, aud, sub, nonce, metadata_id, bucket_id, max_bytes, device } = claims;
  if (!isIntegerSeconds(iat) || !isIntegerSeconds(nbf) || !isIntegerSeconds(exp)) return undefined;
  if (!isIntegerSeconds(max_bytes) || aud !== STORAGE_AUDIENCE) return undefined;
  if (!isUuid(sub) || !isUuid(metadata_id) || !isUuid(bucket_id) || !isFingerprint(device)) {
    return undefined;
  }
  if (typeof nonce !== 'string' || nonce.length < 12) return undefined;
  if (exp - iat > uploadWindowSeconds) return undefined;
  if (!timesAreValid({ iat, nbf, exp }, nowSeconds, leewaySeconds, uploadWindowSeconds)) {
    return undefined;
  }
  return { iat, nbf, exp, aud, sub, nonce, metadata_id, bucket_id, max_bytes, device };
}

export interface MintStorageAuthorizationInput {
  readonly serviceKey: KeyObject;
  readonly serviceFingerprint: string;
  readonly userId: string;
  readonly metadataId: string;
  readonly bucketId: string;
  readonly maxBytes: number;
  readonly deviceFingerprint: string;
  readonly issuedAtSeconds: number;
  readonly expiresAtSeconds: number;
}

export function mintStorageAuthorization(input: MintStorageAuthorizationInput): string {
  const claims: StorageClaims = {
    iat: input.issuedAtSeconds,
    nbf: input.issuedAtSeconds,
    exp: input.expiresAtSeconds,
    aud: STORAGE_AUDIENCE,
    sub: input.userId,
    nonce: randomNonce(),
    metadata_id: input.metadataId,
    bucket_id: input.bucketId,
    max_bytes: input.maxBytes,
    device: input.deviceFingerprint,
  };
  const header = { alg: 'ES384', typ: 'JWT', kid: input.serviceFingerprint };
  return signCompactJws(header, { ...claims }, input.serviceKey);
}
