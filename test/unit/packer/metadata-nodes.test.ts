import { randomBytes } from 'node:crypto';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { describe, expect, it } from 'vitest';
import { MetadataNodes } from '../../../main/packer/metadata-nodes.ts';
import { cidText, DAG_PB_CODEC, RAW_CODEC } from '../../../main/protocol/index.ts';

async function node(size: number): Promise<{ key: string; cid: CID; bytes: Uint8Array }> {
  const bytes = randomBytes(size);
  const cid = CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes));
  return { key: cidText(cid), cid, bytes };
}

describe('MetadataNodes', () => {
  it('gives back every node byte for byte, across slabs and for large nodes, ordered by CID', async () => {
    // Enough small nodes to fill several 1 MiB slabs, and nodes above the large-node size
    // between them (a folder of thousands of files read in the middle of a tree).
    const small = (count: number) => Promise.all(Array.from({ length: count }, () => node(900)));
    const nodes = [
      ...(await small(1500)),
      await node(200 * 1024),
      ...(await small(1500)),
      await node(600 * 1024),
      await node(0),
      ...(await small(10)),
    ];
    const held = new MetadataNodes();
    for (const { cid, bytes } of nodes) held.put(cid, bytes);
    held.put(nodes[0]?.cid ?? CID.parse(''), randomBytes(5));
    expect(held.size).toBe(nodes.length);
    for (const { cid, key, bytes } of nodes) {
      expect(Buffer.from(held.get(cid) ?? []).equals(bytes)).toBe(true);
      expect(Buffer.from(held.getByText(key) ?? []).equals(bytes)).toBe(true);
    }
    const sorted = [...held.sorted()];
    expect(sorted.map((entry) => cidText(entry.cid))).toEqual(nodes.map((n) => n.key).sort());
    for (const entry of sorted)
      expect(entry.cid.equals(nodes.find((n) => n.key === cidText(entry.cid))?.cid)).toBe(true);
    const absent = await node(10);
    expect(held.get(absent.cid)).toBeUndefined();
    expect(held.getByText(absent.key)).toBeUndefined();
    expect(held.getByText('bafyunknown')).toBeUndefined();
    // The same digest under another codec is another block.
    const sameDigestRaw = CID.createV1(RAW_CODEC, nodes[0]?.cid.multihash ?? absent.cid.multihash);
    expect(held.get(sameDigestRaw)).toBeUndefined();
    expect(held.getByText(cidText(sameDigestRaw))).toBeUndefined();
  });
});
