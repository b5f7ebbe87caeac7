import { randomBytes } from 'node:crypto';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { describe, expect, it } from 'vitest';
import { MetadataNodes } from '../../../main/packer/metadata-nodes.ts';
import { cidText, DAG_PB_CODEC } from '../../../main/protocol/index.ts';

async function node(size: number): Promise<{ key: string; cid: CID; bytes: Uint8Array }> {
  const bytes = randomBytes(size);
  const cid = CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes));
  return { key: cidText(cid), cid, bytes };
}

describe('MetadataNodes', () => {
  it('gives back every node byte for byte, across slabs and for large nodes, ordered by CID', async () => {
    // Enough small nodes to fill several 1 MiB slabs, and nodes above the large-node size.
    const nodes = [
      ...(await Promise.all(Array.from({ length: 3000 }, () => node(900)))),
      await node(200 * 1024),
      await node(600 * 1024),
      await node(0),
    ];
    const held = new MetadataNodes();
    for (const { key, bytes } of nodes) held.put(key, bytes);
    held.put(nodes[0]?.key ?? '', randomBytes(5));
    expect(held.size).toBe(nodes.length);
    for (const { key, bytes } of nodes)
      expect(Buffer.from(held.get(key) ?? []).equals(bytes)).toBe(true);
    const sorted = [...held.sorted()];
    expect(sorted.map((entry) => cidText(entry.cid))).toEqual(nodes.map((n) => n.key).sort());
    for (const entry of sorted)
      expect(entry.cid.equals(nodes.find((n) => n.key === cidText(entry.cid))?.cid)).toBe(true);
    expect(held.get('bafyunknown')).toBeUndefined();
  });
});
