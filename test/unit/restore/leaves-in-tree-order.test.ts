import { fixedSize } from 'ipfs-unixfs-importer/chunker';
import { describe, expect, it } from 'vitest';
import { LeafSizes } from '../../../main/packer/index.ts';
import { cidText, rawCidOf } from '../../../main/protocol/index.ts';
import { leavesInTreeOrder } from '../../../main/restore/leaves-in-tree-order.ts';
import { importedTree } from '../../helpers/imported-tree.ts';

describe('leavesInTreeOrder', () => {
  it('gives each leaf once, file by file as a restore walks the tree, then any the tree does not reach', async () => {
    const {
      root,
      nodes,
      leaves: imported,
    } = await importedTree(
      [
        { path: 'root/c.txt', content: Buffer.from('zzzz') },
        { path: 'root/b.txt', content: Buffer.from('xxxxyyy') },
        { path: 'root/a/one.txt', content: Buffer.from('xxxxwwww') },
      ],
      { chunker: fixedSize({ chunkSize: 4 }) },
    );
    // The metadata lists leaves in another order (here the reverse of the import), and one
    // of a File node no folder links to.
    const leaves = new LeafSizes();
    const stray = await rawCidOf(Buffer.from('stray'));
    leaves.add(stray, 5);
    for (const { cid, size } of [...imported].reverse()) leaves.add(cid, size);

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
