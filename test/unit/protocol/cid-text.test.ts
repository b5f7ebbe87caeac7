import { randomBytes } from 'node:crypto';
import { base32 } from 'multiformats/bases/base32';
import { CID } from 'multiformats/cid';
import { describe, expect, it } from 'vitest';
import {
  cidFromSha256,
  cidText,
  DAG_CBOR_CODEC,
  cidBytesOfText,
  DAG_PB_CODEC,
  isCidText,
  parseCidText,
  RAW_CODEC,
} from '../../../main/protocol/index.ts';

describe('cidText', () => {
  it('spells every protocol CID as multiformats does, and parses back to the same CID', () => {
    for (const codec of [RAW_CODEC, DAG_PB_CODEC, DAG_CBOR_CODEC]) {
      for (let index = 0; index < 200; index += 1) {
        const cid = cidFromSha256(codec, randomBytes(32));
        const text = cidText(cid);
        expect(text).toBe(cid.toString(base32));
        expect(parseCidText(text)?.equals(cid)).toBe(true);
      }
    }
  });

  it('spells CIDs of other byte lengths too (a two-byte codec, a short digest)', () => {
    const dagJson = CID.createV1(0x0129, cidFromSha256(RAW_CODEC, randomBytes(32)).multihash);
    expect(cidText(dagJson)).toBe(dagJson.toString(base32));
    const identity = CID.parse('bafkqaddimvwgy3zao5xxe3debi');
    expect(cidText(identity)).toBe('bafkqaddimvwgy3zao5xxe3debi');
  });
});

describe('isCidText', () => {
  const valid = [RAW_CODEC, DAG_PB_CODEC, DAG_CBOR_CODEC].map((codec) =>
    cidText(cidFromSha256(codec, randomBytes(32))),
  );
  const otherHash = CID.createV1(RAW_CODEC, {
    code: 0x13,
    size: 32,
    digest: randomBytes(32),
    bytes: Uint8Array.from([0x13, 0x20, ...randomBytes(32)]),
  }).toString(base32);
  const texts: unknown[] = [
    ...valid,
    ...valid.map((text) => text.toUpperCase()),
    ...valid.map((text) => text.slice(0, -1)),
    ...valid.map((text) => `${text}a`),
    // The last character carries two padding bits: set them, and the spelling is not canonical.
    ...valid.map((text) => text.slice(0, -1) + String.fromCharCode(text.charCodeAt(58) + 1)),
    ...valid.map((text) => `z${text.slice(1)}`),
    ...valid.flatMap((text) =>
      [5, 20, 40].map((at) => `${text.slice(0, at)}1${text.slice(at + 1)}`),
    ),
    otherHash,
    cidText(CID.createV1(0x0129, cidFromSha256(RAW_CODEC, randomBytes(32)).multihash)),
    cidText(CID.createV1(0x0200, cidFromSha256(RAW_CODEC, randomBytes(32)).multihash)),
    'QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG',
    'bafkqaddimvwgy3zao5xxe3debi',
    '',
    'b',
    42,
    null,
  ];

  it('accepts exactly what parseCidText accepts, without parsing', () => {
    for (const text of texts)
      expect([text, isCidText(text)]).toEqual([text, parseCidText(text) !== undefined]);
    expect(valid.every((text) => isCidText(text))).toBe(true);
    for (const text of valid)
      expect(Buffer.from(cidBytesOfText(text) ?? [])).toEqual(Buffer.from(CID.parse(text).bytes));
  });

  it('accepts every spelling of random protocol CIDs, and rejects each one-character change', () => {
    for (let index = 0; index < 300; index += 1) {
      const text = cidText(cidFromSha256(DAG_PB_CODEC, randomBytes(32)));
      expect(isCidText(text)).toBe(true);
      const at = 1 + (index % 58);
      const changed = `${text.slice(0, at)}${text[at] === 'a' ? 'b' : 'a'}${text.slice(at + 1)}`;
      expect(isCidText(changed)).toBe(parseCidText(changed) !== undefined);
    }
  });
});
