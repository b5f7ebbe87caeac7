import { createPublicKey, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';
import type forge from 'node-forge';
import { blake3 } from '@noble/hashes/blake3.js';

// §4: a public key travels as SPKI PEM holding id-ecPublicKey, secp384r1 and an uncompressed
// 97-byte point. Node's crypto alone is lax (it takes compressed points and BER), so the DER is
// inspected field by field with node-forge's ASN.1 reader first, then OpenSSL checks the point
// is on the curve.

// node-forge's ASN.1 reader and the byte buffer it reads, alone: its index loads all of forge
// (ciphers, TLS, PKI), 50-80 ms of every command's start, and an ESM import of even one of its
// files costs as much; required, these two load in under 10 ms.
const requireForge = createRequire(import.meta.url);
const asn1 = requireForge('node-forge/lib/asn1') as typeof forge.asn1;
const forgeUtil = requireForge('node-forge/lib/util') as typeof forge.util;

const OID_EC_PUBLIC_KEY = '1.2.840.10045.2.1';
const OID_SECP384R1 = '1.3.132.0.34';
const POINT_LENGTH = 97;
const COORDINATE_LENGTH = 48;

const PEM_PATTERN =
  /^\s*-----BEGIN PUBLIC KEY-----\r?\n?([A-Za-z0-9+/=\s]+?)-----END PUBLIC KEY-----\s*$/;

export interface P384PublicKey {
  /** The DER SubjectPublicKeyInfo, exactly as received. */
  readonly spki: Uint8Array;
  /** `04 ‖ x ‖ y`. */
  readonly point: Uint8Array;
  readonly fingerprint: string;
  readonly keyObject: KeyObject;
}

export class PublicKeyError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'PublicKeyError';
  }
}

function decodeStrictBase64(text: string): Uint8Array {
  const compact = text.replace(/\s+/g, '');
  if (compact.length === 0 || compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) {
    throw new PublicKeyError('not valid base64');
  }
  const bytes = Buffer.from(compact, 'base64');
  if (bytes.toString('base64') !== compact) throw new PublicKeyError('not canonical base64');
  return new Uint8Array(bytes);
}

function readSpki(der: Uint8Array): Uint8Array {
  let node: forge.asn1.Asn1;
  try {
    // The typings only know the old boolean form; the options object is forge's documented API.
    const options = { strict: true, parseAllBytes: true, decodeBitStrings: false };
    node = asn1.fromDer(
      forgeUtil.createBuffer(Buffer.from(der).toString('binary')),
      options as unknown as boolean,
    );
  } catch {
    throw new PublicKeyError('not a DER SubjectPublicKeyInfo');
  }
  // DER has one encoding per value; a re-encode that differs means BER or padding tricks.
  if (asn1.toDer(node).getBytes() !== Buffer.from(der).toString('binary')) {
    throw new PublicKeyError('not canonical DER');
  }
  const { Class, Type } = asn1;
  const children = node.value;
  if (
    node.tagClass !== Class.UNIVERSAL ||
    node.type !== Type.SEQUENCE ||
    !Array.isArray(children)
  ) {
    throw new PublicKeyError('not a SubjectPublicKeyInfo');
  }
  const [algorithm, subjectPublicKey, ...rest] = children;
  if (!algorithm || !subjectPublicKey || rest.length > 0 || !Array.isArray(algorithm.value)) {
    throw new PublicKeyError('not a SubjectPublicKeyInfo');
  }
  const [algorithmOid, curveOid, ...extra] = algorithm.value;
  if (algorithmOid?.type !== Type.OID || typeof algorithmOid.value !== 'string') {
    throw new PublicKeyError('not a SubjectPublicKeyInfo');
  }
  if (asn1.derToOid(algorithmOid.value) !== OID_EC_PUBLIC_KEY) {
    throw new PublicKeyError('not an EC public key');
  }
  if (
    extra.length > 0 ||
    curveOid?.type !== Type.OID ||
    typeof curveOid.value !== 'string' ||
    asn1.derToOid(curveOid.value) !== OID_SECP384R1
  ) {
    throw new PublicKeyError('curve is not P-384');
  }
  if (subjectPublicKey.type !== Type.BITSTRING || typeof subjectPublicKey.value !== 'string') {
    throw new PublicKeyError('not a SubjectPublicKeyInfo');
  }
  const bitString = Buffer.from(subjectPublicKey.value, 'binary');
  // First byte of a BIT STRING is the count of unused bits; a key has none.
  if (bitString[0] !== 0) throw new PublicKeyError('not a SubjectPublicKeyInfo');
  const point = bitString.subarray(1);
  if (point.length !== POINT_LENGTH || point[0] !== 0x04) {
    throw new PublicKeyError('point is not uncompressed');
  }
  return new Uint8Array(point);
}

/** The §4 fingerprint: BLAKE3 of the SEC1 compressed point, first 20 bytes, lowercase hex. */
export function fingerprintOfPoint(point: Uint8Array): string {
  if (point.length !== POINT_LENGTH || point[0] !== 0x04) throw new PublicKeyError('bad point');
  const x = point.subarray(1, 1 + COORDINATE_LENGTH);
  const yLast = point[POINT_LENGTH - 1] ?? 0;
  const compressed = new Uint8Array(1 + COORDINATE_LENGTH);
  compressed[0] = (yLast & 1) === 1 ? 0x03 : 0x02;
  compressed.set(x, 1);
  return Buffer.from(blake3(compressed).subarray(0, 20)).toString('hex');
}

/** Parses and strictly validates a P-384 SPKI PEM (§4.2). Throws PublicKeyError. */
export function parseP384PublicKeyPem(pem: string): P384PublicKey {
  const match = PEM_PATTERN.exec(pem);
  if (!match?.[1]) throw new PublicKeyError('not a PEM public key');
  const spki = decodeStrictBase64(match[1]);
  const point = readSpki(spki);
  let keyObject: KeyObject;
  try {
    // OpenSSL rejects coordinates outside the field and points not on the curve.
    keyObject = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
  } catch {
    throw new PublicKeyError('point is not on the curve');
  }
  return { spki, point, fingerprint: fingerprintOfPoint(point), keyObject };
}

/** Writes SPKI DER as PEM with 64-character lines, as clients must (§4.2). */
export function spkiToPem(spki: Uint8Array): string {
  const base64 = Buffer.from(spki).toString('base64');
  const lines = base64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN PUBLIC KEY-----\n${lines.join('\n')}\n-----END PUBLIC KEY-----\n`;
}
