import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import type { DecodedNode } from './walk-tree.ts';
import {
  cidText,
  DAG_PB_CODEC,
  lengthOfPieces,
  RAW_CODEC,
  UncheckedCarBlock,
} from '../protocol/index.ts';

// A restored file's bytes, walked from its UnixFS File node (§17.1) one leaf at a time: the
// next leaf is asked for only once the reader has taken the previous one, so a file of any
// size holds at most one leaf here. The library exporter walks ahead of its reader without
// waiting and copies every block once more: on a 100 MiB file it held tens of megabytes.
// A leaf comes as the pieces it arrived in over the network, and goes out as them: its writer
// writes them in one call, without their being copied together first. A large leaf may come
// not yet checked against its CID: its writer checks it where it copies it (file-output.ts).

/** Deeper than any balanced layout of 1024-link nodes can be: a tree this deep is hostile. */
export const MAX_DEPTH = 32;

/**
 * A run of zero bytes its writer leaves as a hole in the file, taking no room on the disk: a
 * leaf of zeros in a sparse restore, known by its CID alone (zero-chunk.ts).
 */
export class Hole {
  constructor(readonly length: number) {}
}

/**
 * A leaf as fetched: its bytes in the pieces they arrived in, already checked; or a leaf whose
 * writer must still check it, and write nothing of it as the file's unless it matches.
 */
export type LeafPart = readonly Uint8Array[] | UncheckedCarBlock;

/** What a file's bytes come as: a leaf or a node's own data, or a hole. */
export type FilePart = LeafPart | Hole;

/** The bytes in a part. */
export function lengthOfPart(part: FilePart): number {
  return part instanceof UncheckedCarBlock || part instanceof Hole
    ? part.length
    : lengthOfPieces(part);
}

export interface FileDag {
  /** A dag-pb node from the version's metadata; undefined when it has none by that CID. */
  node(cid: CID): Uint8Array | undefined;
  /** A raw leaf's bytes: in pieces already checked against its CID, or still to be checked. */
  leaf(cid: CID): Promise<FilePart>;
}

function damaged(cid: CID, why: string): EngineError {
  return new EngineError('protocol', `file node ${cid.toString()} is damaged (${why})`);
}

/** `decoded` as a node of a file's DAG; throws if it is not one. */
function checkedFileNode(cid: CID, decoded: DecodedNode): DecodedNode {
  const { unixfs, links } = decoded;
  if (unixfs.type !== 'file' && unixfs.type !== 'raw') throw damaged(cid, `a ${unixfs.type}`);
  if (links.length !== unixfs.blockSizes.length)
    throw damaged(cid, 'its links and block sizes differ in number');
  return decoded;
}

/** A dag-pb node of a file's DAG: its own data, its links and their byte counts. */
function fileNode(cid: CID, dag: FileDag): DecodedNode {
  const bytes = dag.node(cid);
  if (!bytes) throw new EngineError('protocol', `the metadata lacks node ${cidText(cid)}`);
  let node: dagPb.PBNode;
  let unixfs: UnixFS;
  try {
    node = dagPb.decode(bytes);
    if (!node.Data) throw new Error('no UnixFS data');
    unixfs = UnixFS.unmarshal(node.Data);
  } catch (error) {
    throw damaged(cid, error instanceof Error ? error.message : String(error));
  }
  return checkedFileNode(cid, { unixfs, links: node.Links });
}

/**
 * The bytes of the file whose root is `root` (a File node, or a lone raw leaf), in order, a
 * leaf or a node's own data at a time, each in pieces.
 * Throws a protocol EngineError when the DAG is damaged: a node missing or not a file, a
 * size that differs from the one its parent states, a link of another codec, or too deep.
 */
export async function* fileBytes(
  root: CID,
  dag: FileDag,
  /** The root node, decoded already (TreeEntry.fileNode). */
  decodedRoot?: DecodedNode,
): AsyncGenerator<FilePart> {
  if (root.code === RAW_CODEC) {
    yield await dag.leaf(root);
    return;
  }
  const top = decodedRoot ? checkedFileNode(root, decodedRoot) : fileNode(root, dag);
  // Every leaf must have the size its parent states, and every inner node the size its parent
  // states for it; a node's size is its own data plus those. So what is yielded adds up to the
  // File node's size exactly, without a running count.
  // An explicit stack instead of recursion: each frame is a node and its next link.
  const stack = [{ cid: root, ...top, next: 0 }];
  if (top.unixfs.data && top.unixfs.data.length > 0) yield [top.unixfs.data];
  for (let frame = stack.at(-1); frame; frame = stack.at(-1)) {
    const index = frame.next;
    const link = frame.links[index];
    if (!link) {
      stack.pop();
      continue;
    }
    frame.next += 1;
    const stated = frame.unixfs.blockSizes[index] ?? 0n;
    if (link.Hash.code === RAW_CODEC) {
      const leaf = await dag.leaf(link.Hash);
      const length = lengthOfPart(leaf);
      if (BigInt(length) !== stated)
        throw damaged(frame.cid, `leaf ${index} has ${length} bytes, not ${stated}`);
      yield leaf;
    } else if (link.Hash.code === DAG_PB_CODEC) {
      if (stack.length >= MAX_DEPTH) throw damaged(root, `deeper than ${MAX_DEPTH} levels`);
      const child = fileNode(link.Hash, dag);
      if (child.unixfs.fileSize() !== stated)
        throw damaged(
          frame.cid,
          `link ${index} holds ${child.unixfs.fileSize()} bytes, not ${stated}`,
        );
      stack.push({ cid: link.Hash, ...child, next: 0 });
      if (child.unixfs.data && child.unixfs.data.length > 0) yield [child.unixfs.data];
    } else {
      throw damaged(frame.cid, `link ${index} has codec ${link.Hash.code}`);
    }
  }
}
