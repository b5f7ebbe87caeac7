import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { describe, expect, it } from 'vitest';
import { CidTable, cidText, DAG_PB_CODEC, RAW_CODEC } from '../../../main/protocol/index.ts';

async function rawCid(index: number): Promise<CID> {
  return CID.createV1(RAW_CODEC, await sha256.digest(Buffer.from(`leaf ${index}`)));
}

describe('CidTable', () => {
  it('numbers CIDs in the order added, keeps each once, and finds them by CID and by text as it grows', async () => {
    // Several times the initial capacity, so the table grows and rehashes on the way.
    const cids = await Promise.all(Array.from({ length: 5000 }, (_, index) => rawCid(index)));
    const table = new CidTable(RAW_CODEC);
    cids.forEach((cid, index) => expect(table.add(cid)).toBe(index));
    expect(table.add(cids[1234] ?? CID.parse(''))).toBe(1234);
    expect(table.size).toBe(cids.length);
    cids.forEach((cid, index) => {
      expect(table.indexOf(cid)).toBe(index);
      expect(table.indexOfText(cidText(cid))).toBe(index);
      expect(table.cidAt(index).equals(cid)).toBe(true);
    });
    const absent = await rawCid(-1);
    expect(table.has(absent)).toBe(false);
    expect(table.indexOfText(cidText(absent))).toBe(-1);
    expect(table.indexOfText('not a cid')).toBe(-1);
    expect(() => table.cidAt(cids.length)).toThrow(RangeError);
  });

  it('holds one codec: another codec with the same digest is absent, and cannot be added', async () => {
    const raw = await rawCid(7);
    const table = new CidTable(RAW_CODEC);
    table.add(raw);
    const node = CID.createV1(DAG_PB_CODEC, raw.multihash);
    expect(table.has(node)).toBe(false);
    expect(table.indexOfText(cidText(node))).toBe(-1);
    expect(() => table.add(node)).toThrow(/codec/);
  });
});
