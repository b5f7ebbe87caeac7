import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { base32 } from 'multiformats/bases/base32';
import * as Digest from 'multiformats/hashes/digest';
import { sha256Of } from './sha256-of.ts';

// §3: CIDv1, multihash sha2-256 with a 32-byte digest, codec raw, dag-pb or dag-cbor, written in
// multibase base32 lower case. Everything else is not a CID as far as the protocol is concerned.
export const RAW_CODEC = 0x55;
export const DAG_PB_CODEC = 0x70;
export const DAG_CBOR_CODEC = 0x71;
export const SHA2_256_CODE = 0x12;

const ALLOWED_CODECS: ReadonlySet<number> = new Set([RAW_CODEC, DAG_PB_CODEC, DAG_CBOR_CODEC]);
const BASE32_TEXT = /^b[a-z2-7]+$/;

export type ProtocolCid = CID;

/** True when a decoded CID has the one shape §3 allows. */
export function isProtocolCid(cid: CID): boolean {
  return (
    cid.version === 1 &&
    ALLOWED_CODECS.has(cid.code) &&
    cid.multihash.code === SHA2_256_CODE &&
    cid.multihash.size === 32 &&
    cid.multihash.digest.length === 32
  );
}

/** Parses CID text per §3, or returns undefined for anything that is not well-formed. */
export function parseCidText(text: unknown): CID | undefined {
  if (typeof text !== 'string' || text.length > 128 || !BASE32_TEXT.test(text)) return undefined;
  let cid: CID;
  try {
    cid = CID.parse(text, base32);
  } catch {
    // Not a CID at all: the caller turns this into 400 (body) or 404 (path).
    return undefined;
  }
  if (!isProtocolCid(cid)) return undefined;
  // Reject non-canonical spellings (e.g. trailing bits) so one block has exactly one name.
  if (cid.toString(base32) !== text) return undefined;
  return cid;
}

/** The CIDv1 raw sha2-256 that a shard body must hash to (§11.2). */
export function parseRawCidText(text: unknown): CID | undefined {
  const cid = parseCidText(text);
  return cid?.code === RAW_CODEC ? cid : undefined;
}

export async function rawCidOf(bytes: Uint8Array): Promise<CID> {
  return CID.createV1(RAW_CODEC, await sha256.digest(bytes));
}

export function cidFromSha256(codec: number, digest: Uint8Array): CID {
  return CID.createV1(codec, Digest.create(SHA2_256_CODE, digest));
}

/** The CID of `bytes` as a block of `codec`, hashed at once: no promise for a few microseconds. */
export function sha256CidOf(codec: number, bytes: Uint8Array): CID {
  return cidFromSha256(codec, sha256Of(bytes));
}

const BASE32_ALPHABET = Buffer.from('abcdefghijklmnopqrstuvwxyz234567', 'latin1');

/**
 * A CIDv1's text in §3's spelling: 'b' and its bytes in base32 lower case, unpadded. Written
 * into a byte buffer rather than through multiformats, whose encoder appends one character at
 * a time: the cons-string chain it leaves behind for every CID was, at tens of thousands of
 * CIDs, the largest share of what a restore's garbage collector had to promote and sweep.
 */
export function cidText(cid: CID): string {
  if (cid.version !== 1) return cid.toString(base32);
  const bytes = cid.bytes;
  const out = Buffer.allocUnsafe(1 + Math.ceil((bytes.length * 8) / 5));
  out[0] = 0x62; // 'b', the base32 multibase prefix
  let length = 1;
  let value = 0;
  let bits = 0;
  for (const byte of bytes) {
    value = ((value << 8) | byte) & 0xfff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out[length++] = BASE32_ALPHABET[(value >>> bits) & 31] ?? 0;
    }
  }
  if (bits > 0) out[length++] = BASE32_ALPHABET[(value << (5 - bits)) & 31] ?? 0;
  return out.toString('latin1', 0, length);
}

/** Bytes of every CID §3 allows: version, codec, sha2-256 code and length, 32-byte digest. */
export const PROTOCOL_CID_BYTES = 36;
/** Its text: 'b', then 288 bits in 5-bit characters, the last one padded with two zero bits. */
const PROTOCOL_CID_TEXT_LENGTH = 1 + Math.ceil((PROTOCOL_CID_BYTES * 8) / 5);

function base32Value(code: number): number {
  if (code >= 0x61 && code <= 0x7a) return code - 0x61; // a-z
  if (code >= 0x32 && code <= 0x37) return code - 0x32 + 26; // 2-7
  return -1;
}

/**
 * The bytes of a CID written as parseCidText accepts, decided on the text alone; undefined for
 * any other text. The CID lists of §11.3 hold tens of thousands, and parsing each into a CID
 * object (then spelling it again to check it is canonical) made about 1.5 KB of garbage a
 * CID, enough to grow the heap by 50 MB; this makes 36 bytes.
 */
export function cidBytesOfText(text: unknown): Buffer | undefined {
  if (typeof text !== 'string' || text.length !== PROTOCOL_CID_TEXT_LENGTH) return undefined;
  if (text.charCodeAt(0) !== 0x62) return undefined; // 'b'
  const bytes = Buffer.allocUnsafe(PROTOCOL_CID_BYTES);
  let length = 0;
  let value = 0;
  let bits = 0;
  for (let index = 1; index < text.length; index++) {
    const digit = base32Value(text.charCodeAt(index));
    if (digit < 0) return undefined;
    value = ((value << 5) | digit) & 0xfff;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      bytes[length++] = (value >>> bits) & 0xff;
    }
  }
  // Canonical spelling: the padding bits of the last character are zero.
  if ((value & ((1 << bits) - 1)) !== 0) return undefined;
  const codec = bytes[1] ?? -1;
  const wellFormed =
    bytes[0] === 1 && ALLOWED_CODECS.has(codec) && bytes[2] === SHA2_256_CODE && bytes[3] === 32;
  return wellFormed ? bytes : undefined;
}

/** True when `text` is what parseCidText accepts (see cidBytesOfText). */
export function isCidText(text: unknown): text is string {
  return cidBytesOfText(text) !== undefined;
}
