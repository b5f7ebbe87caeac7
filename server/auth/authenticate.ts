import { createPublicKey, type KeyObject } from 'node:crypto';
import {
  checkDeviceClaims,
  checkStorageClaims,
  decodeCompactJws,
  es384HeaderKid,
  verifyEs384,
  type StorageClaims,
} from '../../main/protocol/index.ts';
import { notAuthorized } from '../errors.ts';
import type { Db } from '../store/database.ts';
import { findLiveKeyByFingerprint } from '../store/device-keys.ts';
import type { ServiceKey } from './service-key.ts';
import { VerifiedSignatures } from './verified-signatures.ts';

// Verification of device JWTs (§5.1) and storage authorizations (§11.1). Every failure is the
// same 401; nothing tells the caller which check failed.

const BEARER = /^Bearer ([A-Za-z0-9_.-]+)$/;

export interface DeviceCaller {
  readonly userId: string;
  readonly keyId: string;
  readonly fingerprint: string;
}

export interface AuthSettings {
  readonly leewaySeconds: number;
  readonly uploadWindowSeconds: number;
}

const publicKeys = new Map<string, KeyObject>();

function publicKeyOf(keyId: string, spki: Buffer): KeyObject {
  let key = publicKeys.get(keyId);
  if (!key) {
    key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
    if (publicKeys.size > 10_000) publicKeys.clear();
    publicKeys.set(keyId, key);
  }
  return key;
}

const verified = new VerifiedSignatures();

/** Whether the token's signature verifies under `key`; a token that did before does again. */
function signatureVerifies(
  text: string,
  token: { readonly signingInput: string; readonly signature: Uint8Array },
  key: KeyObject,
): boolean {
  if (verified.has(text)) return true;
  if (!verifyEs384(token.signingInput, token.signature, key)) return false;
  verified.add(text);
  return true;
}

function bearerToken(header: string | undefined): string {
  const match = header === undefined ? null : BEARER.exec(header);
  if (!match?.[1]) throw notAuthorized();
  return match[1];
}

export function authenticateDevice(
  db: Db,
  header: string | undefined,
  settings: AuthSettings,
  nowMs: number,
): DeviceCaller {
  const text = bearerToken(header);
  const token = decodeCompactJws(text);
  if (!token) throw notAuthorized();
  const kid = es384HeaderKid(token.header);
  if (kid === undefined) throw notAuthorized();
  const key = findLiveKeyByFingerprint(db, kid);
  if (!key) throw notAuthorized();
  if (!signatureVerifies(text, token, publicKeyOf(key.id, key.spki))) throw notAuthorized();
  const claims = checkDeviceClaims(token, Math.floor(nowMs / 1000), settings.leewaySeconds);
  if (!claims || claims.sub !== key.user_id) throw notAuthorized();
  return { userId: key.user_id, keyId: key.id, fingerprint: key.fingerprint };
}

export function authenticateStorage(
  db: Db,
  header: string | undefined,
  serviceKey: ServiceKey,
  settings: AuthSettings,
  nowMs: number,
): StorageClaims {
  const text = bearerToken(header);
  const token = decodeCompactJws(text);
  if (!token) throw notAuthorized();
  if (es384HeaderKid(token.header) !== serviceKey.fingerprint) throw notAuthorized();
  if (!signatureVerifies(text, token, serviceKey.publicKey)) throw notAuthorized();
  const claims = checkStorageClaims(
    token,
    Math.floor(nowMs / 1000),
    settings.leewaySeconds,
    settings.uploadWindowSeconds,
  );
  if (!claims) throw notAuthorized();
  // An SA dies with the device key that obtained it (§8.2).
  const device = findLiveKeyByFingerprint(db, claims.device);
  if (device?.user_id !== claims.sub) throw notAuthorized();
  return claims;
}
