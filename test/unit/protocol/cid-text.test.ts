import { randomBytes } from 'node:crypto';
import { base32 } from 'multiformats/bases/base32';
import { CID } from 'multiformats/cid';
import { describe, expect, it } from 'vitest';
import {
  cidFromSha256,
  cidText,
  DAG_CBOR_CODEC,
  DAG_PB_CODEC,
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
