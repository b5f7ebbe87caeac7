import * as dagPb from '@ipld/dag-pb';
import { EngineError } from '../api/index.ts';
import {
  CarFormatError,
  cidText,
  DAG_CBOR_CODEC,
  DAG_PB_CODEC,
  RAW_CODEC,
  readCar,
} from '../protocol/index.ts';
import * as dagCbor from '@ipld/dag-cbor';
import { UnixFS } from 'ipfs-unixfs';
import { LeafSizes, MetadataNodes } from '../packer/index.ts';
import type { CID } from 'multiformats/cid';

// Reads a version's metadata CAR (§17.2): the manifest, its dag-pb nodes, and every leaf its
// File nodes list. The nodes are copied out of the CAR as it streams in, so the CAR itself is
// never held whole; a backup keeps the tree it builds on for as long as it packs.

export interface TreeIndex {
  readonly manifest: Record<string, unknown>;
  /** Every leaf the File nodes link to, with its size. */
  readonly leaves: LeafSizes;
  readonly nodes: MetadataNodes;
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield await Promise.resolve(bytes);
}

export async function readTreeIndex(
  car: Uint8Array | AsyncIterable<Uint8Array>,
): Promise<TreeIndex> {
  const nodes = new MetadataNodes();
  const leaves = new LeafSizes();
  let manifest: Record<string, unknown> | undefined;
  let manifestCid: string | undefined;
  try {
    for await (const item of readCar(car instanceof Uint8Array ? once(car) : car, {
      maxBlockBytes: 4 * 1024 * 1024,
      allowV2: true,
    })) {
      if (item.type === 'header') {
        manifestCid = item.roots[0] ? cidText(item.roots[0]) : undefined;
        continue;
      }
      if (item.cid.code === DAG_CBOR_CODEC && cidText(item.cid) === manifestCid) {
        manifest = dagCbor.decode(item.bytes);
      } else if (item.cid.code === DAG_PB_CODEC) {
        nodes.put(item.cid, item.bytes);
        for (const link of dagPb.decode(item.bytes).Links) {
          if (link.Hash.code === RAW_CODEC) leaves.add(link.Hash, link.Tsize ?? 0);
        }
      }
    }
  } catch (error) {
    if (error instanceof CarFormatError)
      throw new EngineError('protocol', `a version's metadata is damaged: ${error.message}`, {
        cause: error,
      });
    throw error;
  }
  if (!manifest || manifest['version'] !== 1) {
    throw new EngineError('protocol', "a version's manifest is missing or of an unknown version");
  }
  return { manifest, leaves, nodes };
}

/**
 * The leaves, in order, under a File node of the tree, or undefined when the node is not in
 * the tree, is not a File, or does not add up to `expectedSize`. Leaves of a node the active
 * version holds are stored, so a file that still matches it needs none of its bytes read.
 */
export function leavesOfFile(
  tree: TreeIndex,
  fileCid: string,
  expectedSize: number,
): Array<{ cid: CID; size: number }> | undefined {
  const out: Array<{ cid: CID; size: number }> = [];
  const visit = (cid: CID | string, depth: number): boolean => {
    const bytes = typeof cid === 'string' ? tree.nodes.getByText(cid) : tree.nodes.get(cid);
    if (!bytes || depth > 8) return false;
    const node = dagPb.decode(bytes);
    if (!node.Data || UnixFS.unmarshal(node.Data).type !== 'file') return false;
    for (const link of node.Links) {
      if (link.Hash.code === RAW_CODEC) out.push({ cid: link.Hash, size: link.Tsize ?? 0 });
      else if (link.Hash.code !== DAG_PB_CODEC || !visit(link.Hash, depth + 1)) return false;
    }
    return true;
  };
  if (!visit(fileCid, 0)) return undefined;
  const total = out.reduce((sum, leaf) => sum + leaf.size, 0);
  return total === expectedSize ? out : undefined;
}
