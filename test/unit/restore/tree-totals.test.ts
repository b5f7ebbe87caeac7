import { UnixFS } from 'ipfs-unixfs';
import { describe, expect, it, vi } from 'vitest';
import { MetadataNodes } from '../../../main/packer/index.ts';
import { checkedTreeTotals, treeTotals } from '../../../main/restore/tree-totals.ts';
import { putNode } from '../../helpers/dag-pb-node.ts';

// What a part of a version's tree holds, counted without walking every path: a folder linked
// from two places counts twice, and is read once; and a part counted is not counted again for
// the same nodes (a restore of one folder checks it twice over).

async function twoCopies() {
  const nodes = new MetadataNodes();
  const file = (text: string) =>
    putNode(nodes, {
      Data: new UnixFS({ type: 'file', data: new TextEncoder().encode(text) }).marshal(),
      Links: [],
    });
  const link = await putNode(nodes, {
    Data: new UnixFS({ type: 'symlink', data: new TextEncoder().encode('one.txt') }).marshal(),
    Links: [],
  });
  const copy = await putNode(nodes, {
    Data: new UnixFS({ type: 'directory' }).marshal(),
    Links: [
      { Name: 'latest', Hash: link, Tsize: 0 },
      { Name: 'one.txt', Hash: await file('one'), Tsize: 0 },
      { Name: 'two.txt', Hash: await file('two!'), Tsize: 0 },
    ],
  });
  const root = await putNode(nodes, {
    Data: new UnixFS({ type: 'directory' }).marshal(),
    Links: [
      { Name: 'copy 1', Hash: copy, Tsize: 0 },
      { Name: 'copy 2', Hash: copy, Tsize: 0 },
    ],
  });
  return { nodes, root };
}

describe('the totals of a tree', () => {
  it('count each path, reading a folder linked twice once', async () => {
    const { nodes, root } = await twoCopies();
    const reads = vi.spyOn(nodes, 'get');
    // Files this small may sit in their inodes: they take no more room than their bytes.
    expect(treeTotals(root, nodes)).toEqual({
      files: 4,
      bytes: 14,
      others: 5,
      roomAt: Array.from({ length: 9 }, () => 14),
    });
    // The root, the copy's folder twice (its node is decoded where linked), its three entries.
    expect(reads).toHaveBeenCalledTimes(6);
    expect(treeTotals(root, nodes, ['copy 2'])).toMatchObject({ files: 2, bytes: 7, others: 2 });
    expect(treeTotals(root, nodes, ['copy 2', 'two.txt'])).toMatchObject({
      files: 1,
      bytes: 4,
      others: 0,
    });
    expect(treeTotals(root, nodes, ['copy 3'])).toBeUndefined();
  });

  it('are counted once for the same nodes, however often they are checked', async () => {
    const { nodes, root } = await twoCopies();
    const manifest = { file_count: 4, total_bytes: 14 };
    const reads = vi.spyOn(nodes, 'get');
    const first = checkedTreeTotals(manifest, root, nodes, ['copy 1'], 'restored');
    const counting = reads.mock.calls.length;
    expect(counting).toBeGreaterThan(0);
    expect(checkedTreeTotals(manifest, root, nodes, ['copy 1'], 'restored')).toEqual(first);
    expect(reads).toHaveBeenCalledTimes(counting);
  });
});
