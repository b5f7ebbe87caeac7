import * as dagPb from '@ipld/dag-pb';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import type { MetadataNodes } from '../../main/packer/index.ts';
import { DAG_PB_CODEC } from '../../main/protocol/index.ts';

// A dag-pb node put by hand into a version's nodes: how a test builds a tree no importer would
// (a hostile server's, or one shaped for a single case).

/** Encodes `node`, keeps it in `nodes` under its CID, and gives that CID. */
export async function putNode(nodes: MetadataNodes, node: dagPb.PBNode): Promise<CID> {
  const bytes = dagPb.encode(node);
  const cid = CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes));
  nodes.put(cid, bytes);
  return cid;
}
