import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { CID } from 'multiformats/cid';
import { RAW_CODEC } from '../protocol/index.ts';
import { MAX_DEPTH } from './file-bytes.ts';
import type { DecodedNode, NodeLookup } from './walk-tree.ts';

// A file's leaves in read order, from its nodes in the metadata: what restoring it fetches, and
// what a lost or damaged block takes from it.

/**
 * The leaves of the file at `cid` in read order, as fileBytes reads them; none for other
 * entries. `decodedRoot` is its File node, when the walk decoded it already.
 */
export function* fileLeaves(
  cid: CID,
  nodes: NodeLookup,
  decodedRoot?: DecodedNode,
  depth = 0,
): Generator<CID> {
  if (cid.code === RAW_CODEC) {
    yield cid;
    return;
  }
  let type: string | undefined;
  let links: readonly dagPb.PBLink[];
  if (decodedRoot) {
    type = decodedRoot.unixfs.type;
    links = decodedRoot.links;
  } else {
    const node = nodes.get(cid);
    if (!node || depth > MAX_DEPTH) return;
    const decoded = dagPb.decode(node);
    type = decoded.Data ? UnixFS.unmarshal(decoded.Data).type : undefined;
    links = decoded.Links;
  }
  // The node types fileBytes reads, so each file's planned reads match the reads it makes.
  if (type !== 'file' && type !== 'raw') return;
  for (const link of links) yield* fileLeaves(link.Hash, nodes, undefined, depth + 1);
}
