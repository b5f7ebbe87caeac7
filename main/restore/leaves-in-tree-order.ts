import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { fileLeaves } from './file-leaves.ts';
import { checkedTreeTotals } from './tree-totals.ts';
import { walkTree } from './walk-tree.ts';

// Every leaf of a version's tree, each once, in the order a restore reads them: file by file,
// as the tree is walked. A backup stores a version's blocks in much that order, side by side in
// its packs, and the server reads blocks asked for in the order they lie in one call. Asked for
// in the order the metadata lists them instead, the blocks of 340 000 small files lay in
// 339 982 runs, each a read of its own (a seek each on a spinning disk); in this order, 337,
// and `canopy verify --all` took 10.3 s instead of 11.5 s from the page cache.

export function* leavesInTreeOrder(tree: TreeIndex): Generator<{ cid: CID; size: number }> {
  const root = CID.asCID(tree.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  // Before the tree is walked: a hostile one could stand for more paths than memory holds.
  checkedTreeTotals(tree.manifest, root, tree.nodes, [], 'verified');
  const { leaves } = tree;
  const given = new Uint8Array(leaves.count);
  for (const entry of walkTree(root, tree.nodes)) {
    if (entry.kind !== 'file') continue;
    for (const cid of fileLeaves(entry.cid, tree.nodes, entry.fileNode)) {
      const index = leaves.indexOf(cid);
      if (index < 0 || given[index] === 1) continue;
      given[index] = 1;
      yield { cid, size: leaves.sizeAt(index) ?? 0 };
    }
  }
  // Leaves of File nodes no entry of the tree reaches, which the metadata still lists.
  for (let index = 0; index < leaves.count; index++) {
    if (given[index] === 1) continue;
    yield { cid: leaves.cidAt(index), size: leaves.sizeAt(index) ?? 0 };
  }
}
