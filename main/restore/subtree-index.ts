import * as dagPb from '@ipld/dag-pb';
import { CID } from 'multiformats/cid';
import { LeafSizes } from '../packer/index.ts';
import { DAG_PB_CODEC, RAW_CODEC } from '../protocol/index.ts';
import type { BrowsableTree, TreeIndexOfFile } from '../uploader/index.ts';
import { MAX_DEPTH } from './file-bytes.ts';
import { checkedTreeTotals } from './tree-totals.ts';
import { versionPathParts } from './version-path.ts';
import { walkTree, type NodeLookup } from './walk-tree.ts';

// What restoring one file or folder of a version needs of its tree: the manifest and the nodes
// as browsing reads them, through the node index kept beside a cached CAR (browsable-tree.ts),
// and the leaves of the files at that path only, with their sizes. Read whole instead, the CAR
// of a version of 300 000 files took 2.4 s of the 4 s it took to restore one file of it.

/**
 * `tree`, with the leaves of the entry at `subPath` (as a user gives it: version-path.ts) and
 * of what it holds. Closing the result closes `tree`, and so does a failure here.
 */
export function subtreeIndex(tree: BrowsableTree, subPath: string): TreeIndexOfFile {
  const leaves = new LeafSizes();
  try {
    const under = versionPathParts(subPath, tree.manifest['source_label']);
    const root = CID.asCID(tree.manifest['root']);
    // No root: restoreVersion says so.
    if (root) {
      // Before the tree is walked: a hostile one could stand for more paths than any disk holds.
      checkedTreeTotals(tree.manifest, root, tree.nodes, under, 'restored');
      for (const entry of walkTree(root, tree.nodes, under))
        if (entry.fileNode) addLeaves(entry.fileNode.links, tree.nodes, leaves, 0);
    }
  } catch (error) {
    tree.close();
    throw error;
  }
  return { manifest: tree.manifest, nodes: tree.nodes, leaves, close: () => tree.close() };
}

/**
 * Adds the raw leaves `links` lead to, each with the size its link states, as reading the
 * whole CAR lists them (previous-tree.ts).
 */
function addLeaves(
  links: readonly dagPb.PBLink[],
  nodes: NodeLookup,
  leaves: LeafSizes,
  depth: number,
): void {
  for (const link of links) {
    if (link.Hash.code === RAW_CODEC) {
      leaves.add(link.Hash, link.Tsize ?? 0);
    } else if (link.Hash.code === DAG_PB_CODEC && depth < MAX_DEPTH) {
      const bytes = nodes.get(link.Hash);
      let below: dagPb.PBNode | undefined;
      try {
        below = bytes && dagPb.decode(bytes);
      } catch {
        // A node that is not dag-pb holds no leaf to list: reading the file comes to it, and
        // reports the file as damaged there.
        below = undefined;
      }
      if (below) addLeaves(below.Links, nodes, leaves, depth + 1);
    }
  }
}
