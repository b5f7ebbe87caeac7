import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import {
  cidFromSha256,
  cidText,
  DAG_PB_CODEC,
  DagPbLinks,
  RAW_CODEC,
  UNIXFS_TYPES,
} from '../protocol/index.ts';
import type { NodeSink } from './pack-source.ts';

// Copies the nodes under a folder reused from the version before into the new tree, in the
// order packing the folder would have made them (node-order.ts): every entry in name order,
// each file's nodes under it first, then the folder's own node; a sharded folder's (HAMT)
// entries in name order too, though its links keep them in hash order, then its shard nodes.
// A metadata CAR thus has the same bytes for a folder whether the backup walked it or not,
// and our service stores them once (server/store/metadata-chunks.ts).
//
// Each raw leaf linked is marked held again: left unmarked, it would be listed as no longer
// referenced, and the host would drop it from the new version's block set.

export interface NodeCopy {
  /** The nodes of the version the folder is reused from. */
  readonly previousNodes: { get(cid: CID): Uint8Array | undefined };
  readonly sink: NodeSink;
  /** Marks a raw leaf held again; false when the version before does not hold it. */
  readonly markLeaf: (digest: Uint8Array) => boolean;
}

/** A link of a node: its target, and its name's bytes. */
interface NodeLink {
  readonly cid: CID;
  readonly name: Uint8Array;
}

/** A node as the copy reads it: its UnixFS type, and its links to dag-pb nodes. */
interface ReadNode {
  readonly type: number;
  readonly links: NodeLink[];
}

/** A node being copied: the nodes under it still to copy, then those written after them. */
interface CopyFrame {
  readonly children: CID[];
  next: number;
  readonly after: ReadonlyArray<{ readonly cid: CID; readonly bytes: Uint8Array }>;
}

/**
 * The name prefix of a HAMT shard's links: two hex digits of the bucket (256 buckets, §17.1).
 * A link of the prefix alone leads to a shard below, a longer one to an entry.
 */
const SHARD_PREFIX_CHARS = 2;

export async function copyTreeNodes(top: CID, copy: NodeCopy): Promise<void> {
  const links = new DagPbLinks();

  const nodeBytes = (cid: CID): Uint8Array => {
    const bytes = copy.previousNodes.get(cid);
    if (!bytes)
      throw new EngineError(
        'protocol',
        `the previous version's metadata lacks node ${cidText(cid)}`,
      );
    return bytes;
  };

  /** Reads a node, marking the raw leaves it links to held. */
  const read = (cid: CID, bytes: Uint8Array): ReadNode => {
    const count = links.read(bytes);
    const found: NodeLink[] = [];
    let held = true;
    let type: number;
    if (count >= 0) {
      type = links.unixfsType;
      for (let link = 0; link < count && held; link++) {
        const codec = links.codecs[link];
        if (codec === DAG_PB_CODEC)
          found.push({ cid: cidFromSha256(codec, links.digest(link)), name: links.name(link) });
        else held = codec === RAW_CODEC && copy.markLeaf(links.digest(link));
      }
    } else {
      // Not a node this client writes: decoded the slow way.
      const node = dagPb.decode(bytes);
      type = node.Data ? unixfsTypeOf(node.Data) : -1;
      for (const link of node.Links) {
        if (link.Hash.code === DAG_PB_CODEC)
          found.push({ cid: link.Hash, name: Buffer.from(link.Name ?? '', 'utf8') });
        else held &&= link.Hash.code === RAW_CODEC && copy.markLeaf(link.Hash.multihash.digest);
      }
    }
    if (!held)
      throw new EngineError(
        'protocol',
        `the previous version's node ${cidText(cid)} links to a block it does not hold`,
      );
    return { type, links: found };
  };

  /**
   * Takes a sharded folder's entries from the shard `cid` (read already as `node`) and the
   * shards below it, and its shard nodes, those below before those above, each shard's links in
   * order.
   */
  const takeShards = (
    cid: CID,
    bytes: Uint8Array,
    node: ReadNode,
    entries: Array<{ name: Uint8Array; cid: CID }>,
    shards: Array<{ cid: CID; bytes: Uint8Array }>,
  ): void => {
    for (const link of node.links) {
      if (link.name.length > SHARD_PREFIX_CHARS) {
        entries.push({ name: link.name.subarray(SHARD_PREFIX_CHARS), cid: link.cid });
      } else {
        const below = nodeBytes(link.cid);
        takeShards(link.cid, below, read(link.cid, below), entries, shards);
      }
    }
    shards.push({ cid, bytes });
  };

  const frameOf = (cid: CID): CopyFrame => {
    const bytes = nodeBytes(cid);
    const node = read(cid, bytes);
    if (node.type !== UNIXFS_TYPES.hamtShard)
      return { children: node.links.map((link) => link.cid), next: 0, after: [{ cid, bytes }] };
    const entries: Array<{ name: Uint8Array; cid: CID }> = [];
    const shards: Array<{ cid: CID; bytes: Uint8Array }> = [];
    takeShards(cid, bytes, node, entries, shards);
    entries.sort((a, b) => Buffer.compare(a.name, b.name));
    return { children: entries.map((entry) => entry.cid), next: 0, after: shards };
  };

  const stack: CopyFrame[] = [frameOf(top)];
  for (let frame = stack.at(-1); frame; frame = stack.at(-1)) {
    const child = frame.children[frame.next];
    if (child) {
      frame.next += 1;
      stack.push(frameOf(child));
      continue;
    }
    stack.pop();
    for (const node of frame.after) await copy.sink.put(node.cid, node.bytes);
  }
}

function unixfsTypeOf(data: Uint8Array): number {
  try {
    const type = UnixFS.unmarshal(data).type;
    return type === 'hamt-sharded-directory' ? UNIXFS_TYPES.hamtShard : -1;
  } catch {
    // Not UnixFS: copied as a node of no known type, its links after it.
    return -1;
  }
}
