import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { cidText, DAG_PB_CODEC } from '../protocol/index.ts';

// A version's tree, walked from its metadata alone: every entry, parents before their
// children, with what restoring it needs. Plain directories and HAMT-sharded ones (§17.1) are
// both read here, link by link, with an explicit stack. The exporter's `recursive` did the
// same through a chain of async generators and spelled out every CID as text on the way,
// which on 10 000 entries was a third of what a restore left to the garbage collector.

export interface TreeEntry {
  readonly cid: CID;
  /** Names from the root down; [] for the root. */
  readonly parts: readonly string[];
  readonly kind: 'file' | 'directory' | 'symlink';
  readonly mode: number | undefined;
  readonly mtimeSeconds: number | undefined;
  /** A symlink's target. */
  readonly target?: string;
}

/** A tree's dag-pb nodes by CID (a MetadataNodes). */
export interface NodeLookup {
  get(cid: CID): Uint8Array | undefined;
}

function damaged(cid: CID, why: string, cause?: unknown): EngineError {
  return new EngineError(
    'protocol',
    `the version's tree is damaged at ${cidText(cid)} (${why})`,
    cause === undefined ? undefined : { cause },
  );
}

function decodeNode(cid: CID, nodes: NodeLookup) {
  if (cid.code !== DAG_PB_CODEC)
    throw damaged(cid, 'an entry that is not a dag-pb node; every file must be a File node');
  const bytes = nodes.get(cid);
  if (!bytes) throw new EngineError('protocol', `the metadata lacks node ${cidText(cid)}`);
  try {
    const node = dagPb.decode(bytes);
    if (!node.Data) throw new Error('no UnixFS data');
    return { links: node.Links, unixfs: UnixFS.unmarshal(node.Data) };
  } catch (error) {
    throw damaged(cid, 'not a UnixFS node', error);
  }
}

/** A directory's entries, in link order; a HAMT shard's sub-shards are read in place. */
function directoryEntries(
  cid: CID,
  links: readonly dagPb.PBLink[],
  unixfs: UnixFS,
  nodes: NodeLookup,
): Array<{ name: string; cid: CID }> {
  if (unixfs.type === 'directory')
    return links.map((link) => ({ name: link.Name ?? '', cid: link.Hash }));
  // HAMT: every link name starts with its bucket in hex, as wide as the fanout needs; a link
  // that is only the bucket leads to a sub-shard, whose entries belong to this directory.
  const fanout = unixfs.fanout;
  if (fanout === undefined || fanout < 2n || fanout > 4096n)
    throw damaged(cid, 'a HAMT shard without a usable fanout');
  const prefix = (fanout - 1n).toString(16).length;
  const out: Array<{ name: string; cid: CID }> = [];
  // Content addressing rules out cycles: a node cannot link to itself or an ancestor.
  const shards: Array<readonly dagPb.PBLink[]> = [links];
  for (let shard = shards.pop(); shard; shard = shards.pop()) {
    for (const link of shard) {
      const name = link.Name ?? '';
      if (name.length > prefix) out.push({ name: name.slice(prefix), cid: link.Hash });
      else if (name.length === prefix) {
        const sub = decodeNode(link.Hash, nodes);
        if (sub.unixfs.type !== 'hamt-sharded-directory')
          throw damaged(link.Hash, 'a HAMT bucket that is not a shard');
        shards.push(sub.links);
      } else throw damaged(cid, `a HAMT link named ${JSON.stringify(name)}`);
    }
  }
  return out;
}

/** Every entry under `root`, the root first, each directory before what it holds. */
export function* walkTree(root: CID, nodes: NodeLookup): Generator<TreeEntry> {
  const stack: Array<{ cid: CID; parts: readonly string[] }> = [{ cid: root, parts: [] }];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const { cid, parts } = next;
    const { links, unixfs } = decodeNode(cid, nodes);
    const mtime = unixfs.mtime;
    const common = {
      cid,
      parts,
      mode: unixfs.mode,
      mtimeSeconds: mtime === undefined ? undefined : Number(mtime.secs) + (mtime.nsecs ?? 0) / 1e9,
    };
    switch (unixfs.type) {
      case 'file':
      case 'raw':
        yield { ...common, kind: 'file' };
        break;
      case 'symlink':
        yield { ...common, kind: 'symlink', target: new TextDecoder().decode(unixfs.data) };
        break;
      case 'directory':
      case 'hamt-sharded-directory': {
        yield { ...common, kind: 'directory' };
        const children = directoryEntries(cid, links, unixfs, nodes);
        // Pushed last to first, so they come off the stack in link order.
        for (let index = children.length - 1; index >= 0; index -= 1) {
          const child = children[index];
          if (child) stack.push({ cid: child.cid, parts: [...parts, child.name] });
        }
        break;
      }
      default:
        throw damaged(cid, `an entry of type ${unixfs.type}`);
    }
  }
}
