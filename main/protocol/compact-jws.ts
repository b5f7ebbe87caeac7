import { randomBytes, sign, verify, type KeyObject } from 'node:crypto';

// Compact JWS with ES384 and raw r ‖ s signatures (§5.1). Parsing is strict: exactly three
// canonical base64url parts, JSON objects for header and claims, a 96-byte signature. The
// signature itself is checked by OpenSSL through node:crypto, never by code of ours.

const BASE64URL = /^[A-Za-z0-9_-]*$/;
export const ES384_SIGNATURE_LENGTH = 96;

export type JsonObject = Record<string, unknown>;

export interface DecodedJws {
  readonly header: JsonObject;
  readonly claims: JsonObject;
  readonly signingInput: string;
  readonly signature: Uint8Array;
}

export function base64urlEncode(bytes: Uint8Array | string): string {
  return Buffer.from(bytes).toString('base64url');
}

/** Decodes base64url without padding, refusing any spelling other than the canonical one. */
export function base64urlDecode(text: string): Uint8Array | undefined {
  if (!BASE64URL.test(text) || text.length % 4 === 1) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.toString('base64url') !== text) return undefined;
  return new Uint8Array(bytes);
}

function decodeJsonObject(part: string): JsonObject | undefined {
  const bytes = base64urlDecode(part);
  if (!bytes) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    // Not JSON: the token is simply invalid, which the caller reports as 401.
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return value as JsonObject;
}

export function decodeCompactJws(token: string): DecodedJws | undefined {
  if (token.length > 16_384) return undefined;
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  const [headerPart, claimsPart, signaturePart] = parts as [string, string, string];
  const header = decodeJsonObject(headerPart);
  const claims = decodeJsonObject(claimsPart);
  const signature = base64urlDecode(signaturePart);
  if (!header || !claims || !signature) return undefined;
  return { header, claims, signingInput: `${headerPart}.${claimsPart}`, signature };
}

export function verifyEs384(signingInput: string, signature: Uint8Array, key: KeyObject): boolean {
  // A DER signature has another length, so this also refuses DER (§5.1).
  if (signature.length !== ES384_SIGNATURE_LENGTH) return false;
  try {
    return verify(
      'sha384',
      Buffer.from(signingInput, 'ascii'),
      { key, dsaEncoding: 'ieee-p1363' },
      signature,
    );
  } catch {
    // OpenSSL refuses malformed inputs by throwing; for a verifier that is a plain "no".
    return false;
  }
}

export function signCompactJws(
  header: JsonObject,
  claims: JsonObject,
  privateKey: KeyObject,
): string {
  const signingInput = `${base64urlEncode(JSON.stringify(header))}.${base64urlEncode(JSON.stringify(claims))}`;
  const signature = sign('sha384', Buffer.from(signingInput, 'ascii'), {
    key: privateKey,
    dsaEncoding: 'ieee-p1363',
  });
  return `${signingInput}.${base64urlEncode(signature)}`;
}

/** A random base64url nonce of `length` characters (§5.1 recommends 32). */
export function randomNonce(length = 32): string {
  return randomBytes(Math.ceil((length * 3) / 4))
    .toString('base64url')
    .slice(0, length);
}

export function hasExactlyKeys(object: JsonObject, keys: readonly string[]): boolean {
  const actual = Object.keys(object);
  return actual.length === keys.length && keys.every((key) => Object.hasOwn(object, key));
}

export function isIntegerSeconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
