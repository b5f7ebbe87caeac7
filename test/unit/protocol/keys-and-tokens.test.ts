import { describe, expect, it } from 'vitest';
import { generateKeyPairSync } from 'node:crypto';
import {
  base64urlDecode,
  checkDeviceClaims,
  decodeCompactJws,
  fingerprintOfPoint,
  hashEnrollmentCode,
  mintDeviceJwt,
  normalizeEnrollmentCode,
  parseP384PublicKeyPem,
  PublicKeyError,
  spkiToPem,
  verifyEs384,
} from '../../../main/protocol/index.ts';

const VECTOR = `-----BEGIN PUBLIC KEY-----
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEqofKIr6LBTeOscce8yCtdG4dO2KLp5uY
WfdB4IJUKjhVAvJdv1UpbDpUXjhydgq3NhfeSpYmLG9dnpi/kpLcKfj0Hb0omhR8
6doxE7XwuMAKYLHOHX6BnXpDHXyQ6g5f
-----END PUBLIC KEY-----`;

describe('P-384 public keys', () => {
  it('gives the §4 fingerprint for the test vector, with any wrapping and surrounding whitespace', () => {
    expect(parseP384PublicKeyPem(VECTOR).fingerprint).toBe(
      'a04a240135a947babf7474f564b251382d10609f',
    );
    const der = parseP384PublicKeyPem(VECTOR).spki;
    const oneLine = `\n  -----BEGIN PUBLIC KEY-----\n${Buffer.from(der).toString('base64')}\n-----END PUBLIC KEY-----\n\n`;
    expect(parseP384PublicKeyPem(oneLine).fingerprint).toBe(
      'a04a240135a947babf7474f564b251382d10609f',
    );
    expect(spkiToPem(der).split('\n')[1]).toHaveLength(64);
  });

  it('computes the compressed-point fingerprint from the uncompressed point', () => {
    const { point } = parseP384PublicKeyPem(VECTOR);
    expect(fingerprintOfPoint(point)).toBe('a04a240135a947babf7474f564b251382d10609f');
  });

  it('refuses non-canonical base64, a point off the curve and a certificate-shaped PEM', () => {
    const der = Buffer.from(parseP384PublicKeyPem(VECTOR).spki);
    const base64 = der.toString('base64');
    expect(() =>
      parseP384PublicKeyPem(
        `-----BEGIN PUBLIC KEY-----\n${base64.slice(0, -1)}g\n-----END PUBLIC KEY-----`,
      ),
    ).toThrow(PublicKeyError);
    const offCurve = Buffer.from(der);
    offCurve[offCurve.length - 1] = (offCurve[offCurve.length - 1] ?? 0) ^ 1;
    expect(() =>
      parseP384PublicKeyPem(
        `-----BEGIN PUBLIC KEY-----\n${offCurve.toString('base64')}\n-----END PUBLIC KEY-----`,
      ),
    ).toThrow('point is not on the curve');
    expect(() => parseP384PublicKeyPem(VECTOR.replace(/PUBLIC KEY/g, 'CERTIFICATE'))).toThrow(
      PublicKeyError,
    );
    const p521 = generateKeyPairSync('ec', { namedCurve: 'P-521' })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    expect(() => parseP384PublicKeyPem(p521)).toThrow('curve is not P-384');
  });
});

describe('device JWTs', () => {
  it('mints tokens that verify and pass the claim rules', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    const now = 1_800_000_000;
    const { token, exp } = mintDeviceJwt({
      privateKey,
      fingerprint: 'a'.repeat(40),
      userId: 'u',
      nowSeconds: now,
    });
    expect(exp).toBe(now + 300);
    const decoded = decodeCompactJws(token);
    expect(decoded).toBeDefined();
    if (!decoded) return;
    expect(verifyEs384(decoded.signingInput, decoded.signature, publicKey)).toBe(true);
    expect(checkDeviceClaims(decoded, now, 20)).toMatchObject({ sub: 'u', aud: 'banyan-platform' });
    expect(checkDeviceClaims(decoded, now + 321, 20)).toBeUndefined();
    expect(checkDeviceClaims(decoded, now - 51, 20)).toBeUndefined();
  });

  it('decodes only canonical base64url', () => {
    expect(base64urlDecode('YQ')).toEqual(new Uint8Array([0x61]));
    expect(base64urlDecode('YR')).toBeUndefined();
    expect(base64urlDecode('YQ==')).toBeUndefined();
    expect(base64urlDecode('Y+')).toBeUndefined();
    expect(decodeCompactJws('a.b')).toBeUndefined();
    expect(decodeCompactJws('a.b.c.d.e')).toBeUndefined();
  });
});

describe('enrollment codes', () => {
  it('normalizes case, separators and Crockford aliases before hashing', () => {
    expect(normalizeEnrollmentCode('abc1o - il0 ')).toBe('ABC10110');
    expect(hashEnrollmentCode('ABCDE-01O1L')).toBe(hashEnrollmentCode('abcde 0 1 0 1 1'));
  });
});
