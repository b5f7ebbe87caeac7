import type { KeyObject } from 'node:crypto';
import {
  hasExactlyKeys,
  isIntegerSeconds,
  randomNonce,
  signCompactJws,
  type DecodedJws,
  type JsonObject,
} from './compact-jws.ts';
import { isFingerprint } from './ids.ts';

// Device JWT rules of §5.1, shared by the verifier (server) and the minter (client).

export const DEVICE_AUDIENCE = 'banyan-platform';
export const MAX_TOKEN_LIFETIME_SECONDS = 900;
export const DEFAULT_CLOCK_LEEWAY_SECONDS = 20;
const HEADER_KEYS = ['alg', 'typ', 'kid'] as const;
const CLAIM_KEYS = ['iat', 'nbf', 'exp', 'sub', 'aud', 'nonce'] as const;
const MIN_NONCE_LENGTH = 12;

export interface DeviceClaims {
  readonly iat: number;
  readonly nbf: number;
  readonly exp: number;
  readonly sub: string;
  readonly aud: string;
  readonly nonce: string;
}

/** The `kid` of a well-shaped ES384 JWT header, or undefined. */
export function es384HeaderKid(header: JsonObject): string | undefined {
  if (!hasExactlyKeys(header, HEADER_KEYS)) return undefined;
  if (header['alg'] !== 'ES384' || header['typ'] !== 'JWT') return undefined;
  return isFingerprint(header['kid']) ? header['kid'] : undefined;
}

/** The time rules shared by device JWTs and storage authorizations (§5.1, §11.1). */
export function timesAreValid(
  claims: { iat: number; nbf: number; exp: number },
  nowSeconds: number,
  leewaySeconds: number,
  maxLifetimeSeconds: number,
): boolean {
  return (
    claims.iat <= nowSeconds + leewaySeconds &&
    claims.nbf <= nowSeconds + leewaySeconds &&
    claims.exp >= nowSeconds - leewaySeconds &&
    claims.nbf < claims.exp &&
    claims.exp <= claims.nbf + maxLifetimeSeconds
  );
}

/** Checks the claim set of a device JWT. Returns the claims, or undefined for any fault. */
export function checkDeviceClaims(
  token: DecodedJws,
  nowSeconds: number,
  leewaySeconds: number,
): DeviceClaims | undefined {
  const { claims } = token;
  if (!hasExactlyKeys(claims, CLAIM_KEYS)) return undefined;
  const { iat, nbf, exp, sub, aud, nonce } = claims;
  if (!isIntegerSeconds(iat) || !isIntegerSeconds(nbf) || !isIntegerSeconds(exp)) return undefined;
  if (typeof sub !== 'string' || aud !== DEVICE_AUDIENCE) return undefined;
  if (typeof nonce !== 'string' || nonce.length < MIN_NONCE_LENGTH) return undefined;
  if (!timesAreValid({ iat, nbf, exp }, nowSeconds, leewaySeconds, MAX_TOKEN_LIFETIME_SECONDS)) {
    return undefined;
  }
  return { iat, nbf, exp, sub, aud, nonce };
}

export interface MintDeviceJwtInput {
  readonly privateKey: KeyObject;
  readonly fingerprint: string;
  readonly userId: string;
  readonly nowSeconds: number;
  readonly lifetimeSeconds?: number;
}

/** Mints a token as §5.1 recommends: iat = now, nbf = now − 30, exp = now + 300. */
export function mintDeviceJwt(input: MintDeviceJwtInput): { token: string; exp: number } {
  const exp = input.nowSeconds + (input.lifetimeSeconds ?? 300);
  const claims: DeviceClaims = {
    iat: input.nowSeconds,
    nbf: input.nowSeconds - 30,
    exp,
    sub: input.userId,
    aud: DEVICE_AUDIENCE,
    nonce: randomNonce(),
  };
  const header = { alg: 'ES384', typ: 'JWT', kid: input.fingerprint };
  return { token: signCompactJws(header, { ...claims }, input.privateKey), exp };
}
