import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { cidText, compareUtf8, DAG_PB_CODEC } from '../protocol/index.ts';

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
  /** Its whole seconds, exactly (as a double with its fraction, they may round up). */
  readonly mtimeWholeSeconds: number | undefined;
  /** The whole time in nanoseconds, exactly. */
  readonly mtimeNanoseconds: bigint | undefined;
  /** A symlink's target. */
  readonly target?: string;
  /**
   * A file's File node, as the walk decoded it: what restoring the file reads of it, without
   * decoding it again (a restore of 100 000 small files decoded each node six times).
   */
  readonly fileNode?: DecodedNode;
}

/** A dag-pb node's links and its UnixFS data, decoded. */
export interface DecodedNode {
  readonly links: readonly dagPb.PBLink[];
  readonly unixfs: UnixFS;
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

/** The node `cid`, decoded from `read` when its bytes were read already. */
function decodeNode(cid: CID, nodes: NodeLookup, read?: Uint8Array): DecodedNode {
  if (cid.code !== DAG_PB_CODEC)
    throw damaged(cid, 'an entry that is not a dag-pb node; every file must be a File node');
  const bytes = read ?? nodes.get(cid);
  if (!bytes) throw new EngineError('protocol', `the metadata lacks node ${cidText(cid)}`);
  try {
    const node = dagPb.decode(bytes);
    if (!node.Data) throw new Error('no UnixFS data');
    return { links: node.Links, unixfs: UnixFS.unmarshal(node.Data) };
  } catch (error) {
    throw damaged(cid, 'not a UnixFS node', error);
  }
}

/**
 * A directory's entries one at a time, in link order; a HAMT shard's sub-shards are read in
 * place, when the walk comes to them. Listed whole up front, a folder of 100 000 files held
 * every entry's CID and path twice over (the restore walks the tree twice at once): about
 * 200 MB of its peak.
 */
class DirectoryCursor {
  /** The links being read, and the next one. */
  private links: readonly dagPb.PBLink[];
  private index = 0;
  /** HAMT sub-shards met and not yet read; the last met is read first. */
  private readonly shards: CID[] = [];
  /** Width of a HAMT link's bucket prefix; undefined for a plain directory. */
  private readonly prefix: number | undefined;

  constructor(
    private readonly cid: CID,
    links: readonly dagPb.PBLink[],
    unixfs: UnixFS,
    private readonly nodes: NodeLookup,
  ) {
    this.links = links;
    if (unixfs.type === 'directory') return;
    // HAMT: every link name starts with its bucket in hex, as wide as the fanout needs; a link
    // that is only the bucket leads to a sub-shard, whose entries belong to this directory.
    const fanout = unixfs.fanout;
    if (fanout === undefined || fanout < 2n || fanout > 4096n)
      throw damaged(cid, 'a HAMT shard without a usable fanout');
    this.prefix = (fanout - 1n).toString(16).length;
  }

  /** The next entry; undefined once every entry was given. */
  next(): { name: string; cid: CID } | undefined {
    // Content addressing rules out cycles: a node cannot link to itself or an ancestor.
    for (;;) {
      const link = this.links[this.index];
      if (link === undefined) {
        const shard = this.shards.pop();
        if (shard === undefined) return undefined;
        const sub = decodeNode(shard, this.nodes);
        if (sub.unixfs.type !== 'hamt-sharded-directory')
          throw damaged(shard, 'a HAMT bucket that is not a shard');
        this.links = sub.links;
        this.index = 0;
        continue;
      }
      this.index += 1;
      const name = link.Name ?? '';
      if (this.prefix === undefined) return { name, cid: link.Hash };
      if (name.length > this.prefix) return { name: name.slice(this.prefix), cid: link.Hash };
      if (name.length !== this.prefix)
        throw damaged(this.cid, `a HAMT link named ${JSON.stringify(name)}`);
      this.shards.push(link.Hash);
    }
  }
}

/** What walkTree reads a folder's entries with. */
interface FolderEntries {
  next(): { name: string; cid: CID } | undefined;
}

/**
 * A folder's entries in the order of their names' UTF-8 bytes: a HAMT shard's come in the order
 * of their hashes, and a node another tool wrote may not sort its links. Read whole when the
 * folder is opened: only the folders on the walk's way down are held at once, where sorting
 * every path at the end held them all (`canopy ls -R` of 300 000 files).
 */
class EntriesByName implements FolderEntries {
  private readonly entries: Array<{ name: string; cid: CID }>;
  private index = 0;

  constructor(cursor: DirectoryCursor) {
    this.entries = linksOf(cursor).sort((a, b) => compareUtf8(a.name, b.name));
  }

  next(): { name: string; cid: CID } | undefined {
    const entry = this.entries[this.index];
    if (entry) this.index += 1;
    return entry;
  }
}

/** The entry at `parts` whose node is `cid`, from that node decoded. */
function entryOf(cid: CID, parts: readonly string[], { links, unixfs }: DecodedNode): TreeEntry {
  const mtime = unixfs.mtime;
  const common = {
    cid,
    parts,
    mode: unixfs.mode,
    mtimeWholeSeconds: mtime === undefined ? undefined : Number(mtime.secs),
    mtimeNanoseconds:
      mtime === undefined ? undefined : mtime.secs * 1_000_000_000n + BigInt(mtime.nsecs ?? 0),
  };
  switch (unixfs.type) {
    case 'file':
    case 'raw':
      return { ...common, kind: 'file', fileNode: { links, unixfs } };
    case 'symlink':
      return { ...common, kind: 'symlink', target: new TextDecoder().decode(unixfs.data) };
    case 'directory':
    case 'hamt-sharded-directory':
      return { ...common, kind: 'directory' };
    default:
      throw damaged(cid, `an entry of type ${unixfs.type}`);
  }
}

/**
 * Every entry under `root`, the root first, each directory before what it holds; with `under`
 * (names from the root down), the entry at that path and what it holds, named from the root
 * all the same, and nothing when the tree has no such path. The folders above it are read only
 * to find the way down: restoring one folder of 10 000 files from a version of 300 000 walked
 * the whole tree, three times over, for 3.8 s of its 15 s. With `depth`, only what lies at
 * most that many levels below the entry at `under` (1: a folder and what it holds itself).
 * `order`: each folder's entries in link order, or by name (EntriesByName), which makes the
 * whole walk go in the order of the paths, name by name.
 */
export function* walkTree(
  root: CID,
  nodes: NodeLookup,
  under: readonly string[] = [],
  depth = Number.POSITIVE_INFINITY,
  order: 'links' | 'names' = 'links',
): Generator<TreeEntry> {
  const top = cidAt(root, under, nodes);
  if (top === undefined) return;
  /** The directories being walked, from the root down. */
  const open: Array<{ parts: readonly string[]; cursor: FolderEntries }> = [];
  let next: { cid: CID; parts: readonly string[] } | undefined = { cid: top, parts: under };
  while (next) {
    const { cid, parts } = next;
    const decoded = decodeNode(cid, nodes);
    const entry = entryOf(cid, parts, decoded);
    // Made before the folder is given: a HAMT shard it cannot read is damage of the folder.
    const cursor = entry.kind === 'directory' ? cursorOf(cid, decoded, nodes) : undefined;
    yield entry;
    if (cursor && parts.length - under.length < depth)
      open.push({ parts, cursor: order === 'names' ? new EntriesByName(cursor) : cursor });
    // The next entry: the deepest open directory's next one, or its parent's once it is done.
    next = undefined;
    while (next === undefined && open.length > 0) {
      const folder = open[open.length - 1] as (typeof open)[number];
      const child = folder.cursor.next();
      if (child) next = { cid: child.cid, parts: [...folder.parts, child.name] };
      else open.pop();
    }
  }
}

function cursorOf(cid: CID, { links, unixfs }: DecodedNode, nodes: NodeLookup): DirectoryCursor {
  return new DirectoryCursor(cid, links, unixfs, nodes);
}

/** The entry whose node is `cid`, decoded, without what it holds. */
export function entryOfNode(cid: CID, nodes: NodeLookup): TreeEntry {
  const decoded = decodeNode(cid, nodes);
  const entry = entryOf(cid, [], decoded);
  if (entry.kind === 'directory') cursorOf(cid, decoded, nodes);
  return entry;
}

/** What a node is, as counting a tree needs it (tree-totals.ts): no more is made of it. */
export type NodeShape =
  | { readonly kind: 'file'; readonly size: bigint }
  | { readonly kind: 'symlink' }
  | {
      readonly kind: 'directory';
      /** The entries it holds itself; a HAMT shard's sub-shards are read when asked for. */
      readonly links: () => Array<{ name: string; cid: CID }>;
    };

/**
 * The node `cid` as a file and its size, a link, or a folder and the entries it holds itself
 * (as directoryLinks gives them, none of them decoded); damaged as walkTree finds it. `read`:
 * its bytes, when they were read already.
 */
export function shapeOfNode(cid: CID, nodes: NodeLookup, read?: Uint8Array): NodeShape {
  const decoded = decodeNode(cid, nodes, read);
  const { type } = decoded.unixfs;
  if (type === 'file' || type === 'raw') return { kind: 'file', size: decoded.unixfs.fileSize() };
  if (type === 'symlink') return { kind: 'symlink' };
  if (type === 'directory' || type === 'hamt-sharded-directory') {
    const cursor = cursorOf(cid, decoded, nodes);
    return { kind: 'directory', links: () => linksOf(cursor) };
  }
  throw damaged(cid, `an entry of type ${type}`);
}

function linksOf(cursor: DirectoryCursor): Array<{ name: string; cid: CID }> {
  const entries: Array<{ name: string; cid: CID }> = [];
  for (let child = cursor.next(); child; child = cursor.next()) entries.push(child);
  return entries;
}

/**
 * The entries a directory node holds itself, by name and CID, in link order (a HAMT shard's
 * sub-shards read in place); none of them is decoded. Undefined for a node that is no directory.
 */
export function directoryLinks(
  cid: CID,
  nodes: NodeLookup,
): Array<{ name: string; cid: CID }> | undefined {
  const { links, unixfs } = decodeNode(cid, nodes);
  if (unixfs.type !== 'directory' && unixfs.type !== 'hamt-sharded-directory') return undefined;
  return linksOf(new DirectoryCursor(cid, links, unixfs, nodes));
}

/** The CID at the path `parts` below the folder `root`; undefined when there is none. */
export function cidAt(root: CID, parts: readonly string[], nodes: NodeLookup): CID | undefined {
  let cid = root;
  for (const part of parts) {
    const { links, unixfs } = decodeNode(cid, nodes);
    // A file or a symlink has nothing under it.
    if (unixfs.type !== 'directory' && unixfs.type !== 'hamt-sharded-directory') return undefined;
    const cursor = new DirectoryCursor(cid, links, unixfs, nodes);
    let found: CID | undefined;
    for (let child = cursor.next(); child && !found; child = cursor.next())
      if (child.name === part) found = child.cid;
    if (!found) return undefined;
    cid = found;
  }
  return cid;
}
