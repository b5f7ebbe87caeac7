import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { cidText } from '../protocol/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { fileLeaves } from './file-leaves.ts';
import { checkedTreeTotals } from './tree-totals.ts';
import { walkTree } from './walk-tree.ts';

// The files of a version that need blocks the server could not give back whole: what a verify
// names when a version is not restorable in full, so the user knows what a restore would leave
// out (and can back those files up again while they still have them).

/** A file a restore would leave out, by its path in the version, and why. */
export interface UnrestorableFile {
  readonly path: string;
  readonly reason: string;
}

/** Every file that needs one of `reasons`' blocks (CID text to reason), with the first's reason. */
export function filesNeedingBlocks(
  tree: TreeIndex,
  reasons: ReadonlyMap<string, string>,
): UnrestorableFile[] {
  const root = CID.asCID(tree.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  checkedTreeTotals(tree.manifest, root, tree.nodes, [], 'verified');
  const found: UnrestorableFile[] = [];
  for (const entry of walkTree(root, tree.nodes)) {
    if (entry.kind !== 'file') continue;
    for (const leaf of fileLeaves(entry.cid, tree.nodes, entry.fileNode)) {
      const reason = reasons.get(cidText(leaf));
      if (reason === undefined) continue;
      found.push({ path: entry.parts.join('/'), reason });
      break;
    }
  }
  return found;
}
