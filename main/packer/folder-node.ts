import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { ImportCandidate, WritableStorage } from 'ipfs-unixfs-importer';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { plainFolderNode, type NodeMeta } from './node-bytes.ts';
import { unixfsDataBytes, withMtime } from './unixfs-data.ts';
import { unixfsImporterOptions } from './unixfs-settings.ts';

// A folder's node, made once its entries are made: the tree is built folder by folder as the
// walk leaves each one, so only the folders still open hold their entries. The importer builds
// the whole tree before it writes any folder, and kept every file's CID and paths until the
// end: about 600 bytes a file, 60 MB on 100 000 files.
//
// The node is the importer's, byte for byte (§17.1: the same bytes give the same CIDs). A plain
// folder is written here as its DirFlat writes it. A folder the importer would shard (HAMT) is
// handed to the importer alone, its entries made already. Whether it shards follows the
// importer's own running estimate ('block-bytes'): after each entry is added, the size the
// node would have, where a subfolder counts with the size of an empty folder node until its
// first entry is added, and from then on as nothing (the importer sizes a folder it is still
// building as nothing, and never sizes it again). Once over the threshold, a folder stays
// sharded.

/** A node made: its CID, and the bytes under it (its Tsize in a parent's link). */
export interface MadeNode {
  readonly cid: CID;
  readonly size: number;
}

/** What a folder's entry is to its folder; `folder` when the entry is itself a folder. */
export interface FolderEntry {
  readonly name: string;
  readonly node: MadeNode;
  readonly folder?: {
    /** The size of its node were it empty: how the importer counts it at first. */
    readonly emptySize: number;
    readonly hasEntries: boolean;
  };
}

/** A folder's mode and mtime, as its node keeps them. */
export type FolderMeta = NodeMeta;

const settings = unixfsImporterOptions();
const SHARD_THRESHOLD_BYTES = settings.shardSplitThresholdBytes ?? 0;
const CID_BYTES = 36;
/** UnixFS leaves a folder's mode out when it is this default. */
const DEFAULT_FOLDER_MODE = 0o755;

/** Bytes of a protobuf varint (dag-pb's sizing, with its rounding of even values up). */
function varintBytes(value: number): number {
  let rest = value % 2 === 0 ? value + 1 : value;
  let bits = 0;
  while (rest >= 1) {
    bits += 1;
    rest = Math.floor(rest / 2);
  }
  return Math.floor((bits + 6) / 7);
}

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** A link's bytes inside a dag-pb node: Hash, Name and Tsize fields, in the Links field. */
function linkBytes(name: string, tsize: number): number {
  const nameBytes = utf8Bytes(name);
  const inner =
    1 +
    varintBytes(CID_BYTES) +
    CID_BYTES +
    1 +
    varintBytes(nameBytes) +
    nameBytes +
    1 +
    varintBytes(tsize);
  return 1 + varintBytes(inner) + inner;
}

/** The Data field's bytes as the importer estimates them for a folder. */
function dataFieldBytes(unixfs: UnixFS): number {
  let inner = 2; // type: directory
  if (unixfs.mode !== undefined && unixfs.mode !== DEFAULT_FOLDER_MODE)
    inner += 1 + varintBytes(unixfs.mode);
  const mtime = unixfs.mtime;
  if (mtime !== undefined) {
    const secs = Number(mtime.secs);
    let time = secs < 0 ? 1 + 10 : 1 + varintBytes(secs);
    if (mtime.nsecs !== undefined) time += 1 + 4;
    inner += 1 + varintBytes(time) + time;
  }
  return 1 + varintBytes(inner) + inner;
}

function folderUnixfs(meta: FolderMeta): UnixFS {
  return new UnixFS({ type: 'directory', mode: meta.mode, mtime: meta.mtime });
}

/** Whether the importer would shard a folder of these entries, added in this order. */
function importerWouldShard(unixfs: UnixFS, entries: readonly FolderEntry[]): boolean {
  let estimate = dataFieldBytes(unixfs);
  for (const entry of entries) {
    const counted = linkBytes(entry.name, entry.folder?.emptySize ?? entry.node.size);
    estimate += counted;
    if (estimate > SHARD_THRESHOLD_BYTES) return true;
    if (entry.folder?.hasEntries === true) estimate -= counted;
  }
  return false;
}

async function stored(block: Uint8Array, blockstore: WritableStorage): Promise<CID> {
  const cid = CID.createV1(dagPb.code, await sha256.digest(block));
  await blockstore.put(cid, block);
  return cid;
}

/** The size of the folder's node with no entries: how its parent counts it at first. */
export function emptyFolderSize(meta: FolderMeta): number {
  return dagPb.encode(dagPb.prepare({ Data: unixfsDataBytes(folderUnixfs(meta)) })).length;
}

/** The node of a folder with `entries`, in the walk's order; its blocks go to `blockstore`. */
export async function makeFolderNode(
  meta: FolderMeta,
  entries: readonly FolderEntry[],
  blockstore: WritableStorage,
): Promise<MadeNode> {
  const unixfs = folderUnixfs(meta);
  if (importerWouldShard(unixfs, entries)) return shardedFolderNode(meta, entries, blockstore);
  const written = plainFolderNode(
    meta,
    entries.map((entry) => ({ name: entry.name, cid: entry.node.cid, size: entry.node.size })),
  );
  if (written) {
    await blockstore.put(written.cid, written.bytes);
    return { cid: written.cid, size: written.size };
  }
  // Names out of UTF-8 byte order (the walk gives them in order): dag-pb sorts them.
  const links = entries.map((entry) => ({
    Name: entry.name,
    Tsize: entry.node.size,
    Hash: entry.node.cid,
  }));
  const block = dagPb.encode(dagPb.prepare({ Data: unixfsDataBytes(unixfs), Links: links }));
  const cid = await stored(block, blockstore);
  return { cid, size: links.reduce((sum, link) => sum + link.Tsize, block.length) };
}

/** A symlink's node, as the importer's symlink builder makes it. */
export async function makeSymlinkNode(
  meta: FolderMeta,
  target: string,
  blockstore: WritableStorage,
): Promise<MadeNode> {
  const unixfs = new UnixFS({
    type: 'symlink',
    data: Buffer.from(target, 'utf8'),
    mode: meta.mode,
    mtime: meta.mtime,
  });
  const block = dagPb.encode(dagPb.prepare({ Data: unixfsDataBytes(unixfs) }));
  return { cid: await stored(block, blockstore), size: block.length };
}

const FOLDER = 'folder';

/** A sharded folder, laid out by the importer from entries made already. */
async function shardedFolderNode(
  meta: FolderMeta,
  entries: readonly FolderEntry[],
  blockstore: WritableStorage,
): Promise<MadeNode> {
  const made = new Map<string, MadeNode>();
  const candidates: ImportCandidate[] = [{ path: FOLDER, mode: meta.mode, mtime: meta.mtime }];
  for (const entry of entries) {
    const path = `${FOLDER}/${entry.name}`;
    made.set(path, entry.node);
    candidates.push({ path, content: [] });
  }
  // The importer writes nodes the folder does not link to (an empty folder's); kept here, only
  // the folder's own shard nodes are written, below.
  const shards = new Map<string, Uint8Array>();
  const kept: WritableStorage = {
    put(cid, bytes) {
      if (!(bytes instanceof Uint8Array)) throw new Error('the importer streamed a node');
      shards.set(cid.toString(), bytes);
      return cid;
    },
  };
  let folder: MadeNode | undefined;
  // Loaded here, not with the engine: only a folder large enough to shard uses it, and every
  // command started some 40 ms sooner without it.
  const { importer } = await import('ipfs-unixfs-importer');
  for await (const result of importer(candidates, kept, {
    ...settings,
    // Every entry is made already: the importer only lays the shards out.
    fileBuilder: (file) => {
      const node = made.get(file.originalPath ?? '');
      if (!node) throw new Error(`no made entry for ${String(file.originalPath)}`);
      // Its path places it in the folder.
      return Promise.resolve({
        cid: node.cid,
        size: BigInt(node.size),
        ...(file.path === undefined ? {} : { path: file.path }),
      });
    },
  })) {
    if (result.path === FOLDER) folder = { cid: result.cid, size: Number(result.size) };
  }
  if (!folder) throw new Error('the importer made no sharded folder');
  const root = await withMtimeWritten(folder.cid, meta, shards);
  await putShards(root, shards, blockstore);
  return { cid: root, size: folder.size };
}

/**
 * The root shard `cid` of `shards` with the folder's mtime (`meta`) as unixfs-data.ts writes
 * it: the importer marshals it with ipfs-unixfs, which gets a time from 2038 on wrong. Put among
 * `shards` under its own CID when that differs; its size is the same (the wrong bytes are as
 * many), and the shards below it carry no mtime.
 */
async function withMtimeWritten(
  cid: CID,
  meta: FolderMeta,
  shards: Map<string, Uint8Array>,
): Promise<CID> {
  const bytes = shards.get(cid.toString());
  if (!bytes) throw new Error(`the importer made no node ${cid.toString()}`);
  const node = dagPb.decode(bytes);
  if (!node.Data) throw new Error(`the importer made a shard ${cid.toString()} with no data`);
  const data = withMtime(node.Data, meta.mtime);
  if (Buffer.from(data).equals(node.Data)) return cid;
  const block = dagPb.encode({ Data: data, Links: node.Links });
  if (block.length !== bytes.length) throw new Error('a shard rewritten took another size');
  const rewritten = CID.createV1(dagPb.code, await sha256.digest(block));
  shards.set(rewritten.toString(), block);
  return rewritten;
}

/**
 * Writes the shard node `cid` and the shards below it, each shard's after those it links to,
 * in link order: the order a copy of the folder writes them in (copy-nodes.ts).
 */
async function putShards(
  cid: CID,
  shards: ReadonlyMap<string, Uint8Array>,
  blockstore: WritableStorage,
): Promise<void> {
  const bytes = shards.get(cid.toString());
  if (!bytes) throw new Error(`the importer made no node ${cid.toString()}`);
  for (const link of dagPb.decode(bytes).Links)
    if (shards.has(link.Hash.toString())) await putShards(link.Hash, shards, blockstore);
  await blockstore.put(cid, bytes);
}
