import { importer, type ImportCandidate } from 'ipfs-unixfs-importer';
import { fixedSize } from 'ipfs-unixfs-importer/chunker';
import type { CID } from 'multiformats/cid';
import { describe, expect, it } from 'vitest';
import { LeafSizes, MetadataNodes } from '../../../main/packer/index.ts';
import { cidText, DAG_PB_CODEC, RAW_CODEC, rawCidOf } from '../../../main/protocol/index.ts';
import { leavesInTreeOrder } from '../../../main/restore/leaves-in-tree-order.ts';

/** A tree of `candidates` cut into 4-byte chunks, its nodes and its leaves as they came. */
async function importTree(candidates: ImportCandidate[]) {
  const nodes = new MetadataNodes();
  const imported: CID[] = [];
  const sizes = new Map<string, number>();
  const store = {
    put: (cid: CID, bytes: Uint8Array) => {
      if (cid.code === DAG_PB_CODEC) nodes.put(cid, bytes);
      if (cid.code === RAW_CODEC) {
        imported.push(cid);
        sizes.set(cidText(cid), bytes.length);
      }
      return Promise.resolve(cid);
    },
  };
  let root: CID | undefined;
  for await (const entry of importer(candidates, store, {
    cidVersion: 1,
    rawLeaves: true,
    reduceSingleLeafToSelf: false,
    chunker: fixedSize({ chunkSize: 4 }),
  }))
    if (entry.path === 'root') root = entry.cid;
  if (!root) throw new Error('no root');
  return { root, nodes, imported, sizes };
}

describe('leavesInTreeOrder', () => {
  it('gives each leaf once, file by file as a restore walks the tree, then any the tree does not reach', async () => {
    const { root, nodes, imported, sizes } = await importTree([
      { path: 'root/c.txt', content: Buffer.from('zzzz') },
      { path: 'root/b.txt', content: Buffer.from('xxxxyyy') },
      { path: 'root/a/one.txt', content: Buffer.from('xxxxwwww') },
    ]);
    // The metadata lists leaves in another order (here the reverse of the import), and one
    // of a File node no folder links to.
    const leaves = new LeafSizes();
    const stray = await rawCidOf(Buffer.from('stray'));
    leaves.add(stray, 5);
    for (const cid of [...imported].reverse()) leaves.add(cid, sizes.get(cidText(cid)) ?? 0);

    const given = [...leavesInTreeOrder({ manifest: { version: 1, root }, leaves, nodes })];
    const chunk = async (bytes: string) => cidText(await rawCidOf(Buffer.from(bytes)));
    // a/one.txt, then b.txt (its first chunk given already), then c.txt; the stray one last.
    expect(given.map(({ cid }) => cidText(cid))).toEqual([
      await chunk('xxxx'),
      await chunk('wwww'),
      await chunk('yyy'),
      await chunk('zzzz'),
      cidText(stray),
    ]);
    expect(given.map(({ size }) => size)).toEqual([4, 4, 3, 4, 5]);
  });
});
