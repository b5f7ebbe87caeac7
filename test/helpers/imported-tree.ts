import { importer, type ImportCandidate, type ImporterOptions } from 'ipfs-unixfs-importer';
import type { CID } from 'multiformats/cid';
import { MetadataNodes } from '../../main/packer/index.ts';
import { DAG_PB_CODEC, RAW_CODEC } from '../../main/protocol/index.ts';

// A tree imported into memory by the standard UnixFS importer, with the spec's CID settings
// (§17.1) and whatever else a test sets (small chunks, early HAMT sharding): its root, its
// dag-pb nodes, and its raw leaves in the order the importer made them.

export async function importedTree(
  candidates: ImportCandidate[],
  options: Partial<ImporterOptions>,
): Promise<{ root: CID; nodes: MetadataNodes; leaves: Array<{ cid: CID; size: number }> }> {
  const nodes = new MetadataNodes();
  const leaves: Array<{ cid: CID; size: number }> = [];
  const store = {
    put: (cid: CID, bytes: Uint8Array) => {
      if (cid.code === DAG_PB_CODEC) nodes.put(cid, bytes);
      if (cid.code === RAW_CODEC) leaves.push({ cid, size: bytes.length });
      return Promise.resolve(cid);
    },
  };
  let root: CID | undefined;
  for await (const entry of importer(candidates, store, {
    cidVersion: 1,
    rawLeaves: true,
    reduceSingleLeafToSelf: false,
    ...options,
  }))
    if (entry.path === 'root') root = entry.cid;
  if (!root) throw new Error('no root');
  return { root, nodes, leaves };
}
