import { closeSync, fstatSync } from 'node:fs';
import path from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { isDiskGone, throwIfStopped } from '../api/index.ts';
import {
  cidFromSha256,
  cidText,
  DAG_PB_CODEC,
  isRestoredTimeOf,
  RAW_CODEC,
  sha256CidOf,
} from '../protocol/index.ts';
import {
  openSourceFile,
  skipKindOf,
  sourceRootEntry,
  walkSource,
  type ExcludeRules,
  type SkippedItem,
  type SourceEntry,
} from '../scanner/index.ts';
import {
  ChangedWhileRead,
  readSmallFile,
  SMALL_FILE_BYTES,
  unreadableReason,
} from './small-file.ts';
import { compactCid } from './compact-cid.ts';
import { LeafListBuilder, oneLeafList } from './leaf-list.ts';
import { buildFileNode, type LeafMaker } from './file-builder.ts';
import { oneLeafFileNode } from './node-bytes.ts';
import {
  emptyFolderSize,
  makeFolderNode,
  makeSymlinkNode,
  type FolderEntry,
  type FolderMeta,
  type MadeNode,
} from './folder-node.ts';
import { ChunkHasher } from './chunk-hasher.ts';
import { SlowReads, SmallFileReadAhead } from './small-file-read-ahead.ts';
import { ChunkReadError, largeFileChunks } from './large-file-chunks.ts';
import { WalkAhead } from './walk-ahead.ts';
import { LeafMarks } from './leaf-marks.ts';
import { UseCounts } from './use-counts.ts';
import { LeafSizes } from './leaf-sizes.ts';
import { unixfsImporterOptions } from './unixfs-settings.ts';
import { NodeOrder, type NodeSlot } from './node-order.ts';
import { copyTreeNodes } from './copy-nodes.ts';

// Turns a source folder into a UnixFS tree (§17.1): raw-leaf chunks go to `onLeaf` as they are
// made (the caller stages the ones the bucket lacks), and the dag-pb nodes to `nodes`; with the
// manifest, they form the metadata CAR. Memory holds no file contents, and of the tree only
// the folders still open and the CIDs of its leaves.
//
// The tree is made as the walk goes: a few files at a time, each folder once the walk has left
// it (folder-node.ts), so memory holds the folders still open, not every file of the tree.
//
// A file the caller knows to be unchanged (`reuse`, fed by the file index) is not read: its
// leaves are laid out again as they were, with the same settings, so its node's CID is the one
// reading would give.

const EMPTY_LEAF_CID = sha256CidOf(RAW_CODEC, new Uint8Array(0));

export interface PackInput {
  readonly sourceDir: string;
  readonly sourceLabel: string;
  readonly deviceFingerprint: string;
  readonly createdAtSeconds: number;
  /**
   * The leaves of the version this tree builds on, which its store holds already. The tree
   * marks those it holds again instead of recording them (PackedTree).
   */
  readonly knownLeaves?: LeafSizes;
  /**
   * Leaves to hand to `onLeaf` even when `knownLeaves` has them: the host could not give them
   * back whole, and needs them sent again. Only leaves read come; `reuse` must not return them.
   */
  readonly resendLeaves?: { has(cid: CID): boolean };
  /**
   * Called once per distinct leaf of the new tree that `knownLeaves` lacks, with where its bytes
   * were first read, its CID's text (spelled once here, for callers that keep leaves by text)
   * and its number among the packed tree's `leaves`. The bytes are lent: their buffer is read
   * into again once the returned promise settles, so a callee that keeps them past that must
   * copy them.
   */
  readonly onLeaf: (
    cid: CID,
    bytes: Uint8Array,
    origin: LeafOrigin,
    text: string,
    leaf: number,
  ) => Promise<void>;
  readonly onSkip: (item: SkippedItem) => void;
  /**
   * Takes every entry of the tree for the file index, a file or a folder once its node is made
   * (so a skipped file does not come). Under a reused folder, nothing comes: see
   * onFolderReused.
   */
  readonly onEntry?: (entry: PackedEntry) => void;
  /**
   * A folder the caller knows unchanged, with everything under it, since the version whose
   * tree `previousNodes` holds; undefined to walk it. Asked once per folder the walk finds
   * (not the source folder itself), before the walk would go into it: a folder reused is not
   * walked, its node and every node under it are copied from `previousNodes`, and its leaves
   * are marked held again. Needs `knownLeaves` of the same version.
   */
  readonly reuseFolder?: (folder: ScannedFolder) => ReusedFolder | undefined;
  /** The dag-pb nodes of the version `knownLeaves` come from, which reused folders copy. */
  readonly previousNodes?: { get(cid: CID): Uint8Array | undefined };
  /**
   * Called once a reused folder is in the tree (after its own entry went to onEntry), with the
   * number of files under it: the caller keeps their index entries as they were.
   */
  readonly onFolderReused?: (folder: ScannedFolder, files: number) => void;
  /** Where the tree's dag-pb nodes go as they are made (a MetadataNodes, or a CAR file). */
  readonly nodes: NodeSink;
  readonly rules?: ExcludeRules;
  readonly onExcluded?: (relativePath: string) => void;
  /** Test seam: runs after a file's last byte was read, before it is checked for changes. */
  readonly afterFileRead?: (relativePath: string) => Promise<void>;
  /**
   * The leaves, in order, of a file whose content is known to be unchanged since they were
   * made; undefined to read it. Leaves returned here are not passed to `onLeaf`.
   */
  readonly reuse?: (file: ScannedFile) => readonly ReusedLeaf[] | undefined;
  /**
   * The mtime the version this tree builds on gave the entry at a path (as the file index that
   * describes it records it); undefined for one it did not hold. An entry whose time on disk is
   * what a restore of that version gave it keeps the version's time (restored-time.ts): a
   * folder restored in place and backed up again gives the version's tree again, not one that
   * differs below the microsecond, and so no new version.
   */
  readonly timeInVersion?: (relativePath: string) => bigint | undefined;
  /** Progress: called with each chunk's size as it is read, and once per file packed. */
  readonly onBytesRead?: (bytes: number) => void;
  readonly onFilePacked?: (file: ScannedFile, reused: boolean) => void;
  /** Stops packing, between two entries or two chunks of a file, with `stopped`. */
  readonly signal?: AbortSignal;
}

export type ScannedFile = Extract<SourceEntry, { kind: 'file' }>;
export type ScannedFolder = Extract<SourceEntry, { kind: 'directory' }>;

/** A folder as the version it is reused from holds it. */
export interface ReusedFolder {
  /** Its node, and the node's Tsize as its parent links to it. */
  readonly cid: CID;
  readonly size: number;
  /** The regular files under it, and their bytes. */
  readonly files: number;
  readonly bytes: number;
  /** Whether it holds any entry at all. */
  readonly hasEntries: boolean;
}

/** Where a leaf's bytes lie in the source: a file relative to the source folder, and an offset. */
export interface LeafOrigin {
  readonly path: string;
  readonly offset: number;
}

export interface ReusedLeaf {
  readonly cid: CID;
  readonly size: number;
}

/** An entry of the packed tree as the file index records it; '' is the source folder. */
export interface PackedEntry {
  readonly path: string;
  readonly kind: 'file' | 'directory' | 'symlink';
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly ino: bigint;
  readonly mode: number;
  readonly target: string | null;
  /** A file's File node, or a folder's node; null for symlinks. */
  readonly cid: string | null;
  /** A folder's node's Tsize, as its parent links to it; null for files and symlinks. */
  readonly nodeSize: number | null;
  /** A file's leaves, in order (leaf-list.ts); null for folders and symlinks. */
  readonly leaves: Uint8Array | null;
}

/**
 * What the file index keeps of a walked entry; a file's node and leaves, or a folder's node,
 * are added once made.
 */
export function packedEntryOf(
  entry: SourceEntry,
  packed:
    | { readonly cid: string; readonly leaves: Uint8Array }
    | { readonly cid: string; readonly nodeSize: number }
    | null = null,
): PackedEntry {
  return {
    path: entry.path,
    kind: entry.kind,
    size: entry.kind === 'file' ? entry.size : 0,
    mtimeNs: entry.mtimeNs,
    ctimeNs: entry.ctimeNs,
    ino: entry.ino,
    mode: entry.mode,
    target: entry.kind === 'symlink' ? entry.target : null,
    cid: packed?.cid ?? null,
    nodeSize: packed && 'nodeSize' in packed ? packed.nodeSize : null,
    leaves: packed && 'leaves' in packed ? packed.leaves : null,
  };
}

/** Takes a tree's dag-pb nodes as they are made; the same node may come more than once. */
export interface NodeSink {
  put(cid: CID, bytes: Uint8Array): void | Promise<void>;
}

export interface PackedTree {
  readonly rootCid: CID;
  /** The manifest (§17.2): the metadata CAR's root, with the nodes given to `nodes`. */
  readonly manifestCid: CID;
  readonly manifestBytes: Uint8Array;
  /** Every distinct leaf of the tree that `knownLeaves` lacks, with its size. */
  readonly leaves: LeafSizes;
  /**
   * Leaves handed to `onLeaf` that no file of the tree holds, by their number among `leaves`:
   * read from a file whose read then failed part way. They are not the version's: the caller
   * drops them from what it sends. Empty unless such a read failed.
   */
  readonly strayLeaves: readonly number[];
  /** Known leaves the tree no longer holds, at most `limit` of them (none without knownLeaves). */
  knownLeavesDropped(limit: number): CID[];
  readonly fileCount: number;
  readonly totalBytes: number;
  /** Files whose size, mtime or ctime changed while they were read: their bytes may be torn. */
  readonly changedWhileRead: readonly string[];
  readonly filesReused: number;
  readonly bytesRead: number;
}

/**
 * UnixFS's mtime: whole seconds, and the nanoseconds after them. Before 1970 the seconds round
 * down, so the fraction stays positive as UnixFS wants it: truncated, half a second before 1960
 * lost its fraction and came out a second late.
 */
function mtimeOf(mtimeNs: bigint): { secs: bigint; nsecs: number } {
  const secs = mtimeNs / 1_000_000_000n;
  const nsecs = mtimeNs % 1_000_000_000n;
  return nsecs < 0n
    ? { secs: secs - 1n, nsecs: Number(nsecs + 1_000_000_000n) }
    : { secs, nsecs: Number(nsecs) };
}

/** Small or unchanged files packed at once: one waiting on onLeaf does not hold up the rest. */
const FILES_AT_ONCE = 4;
/** Large files read and hashed at once, on the hasher's thread. */
const LARGE_FILES_AT_ONCE = 4;
/**
 * How far the walk runs ahead of the packing, in entries: large files that far ahead are read
 * and hashed on the hasher's thread while this one packs the small files before them. A few
 * megabytes of entries at most.
 */
const WALK_AHEAD_ENTRIES = 16_384;

/** A folder of the walk whose entries are still coming. */
interface OpenFolder {
  /** As walked; the source folder's has the path ''. */
  readonly entry: ScannedFolder;
  readonly meta: FolderMeta;
  /** Its entries in walk order, each made or being made; undefined for a file skipped then. */
  readonly entries: Array<{
    readonly name: string;
    readonly made: Promise<FolderEntry | undefined>;
  }>;
  /** Settles its entry in its parent once the folder's node is made. */
  readonly settle: (made: Promise<FolderEntry>) => void;
}

/**
 * What a file being read holds of the tree so far: known leaves by their number among the
 * known ones, others by theirs among the tree's `leaves`. Taken back should its read fail.
 */
interface LeafHoldings {
  readonly known: number[];
  readonly fresh: number[];
}

/** Where a file's leaves come from: read whole already, known unchanged, or read chunk by chunk. */
type FileSource =
  | { readonly kind: 'small'; readonly bytes: Uint8Array }
  | { readonly kind: 'reused'; readonly leaves: readonly ReusedLeaf[] }
  | { readonly kind: 'large'; readonly fd: number };

function nameOf(relativePath: string): string {
  return relativePath.slice(relativePath.lastIndexOf('/') + 1);
}

function parentOf(relativePath: string): string {
  const slash = relativePath.lastIndexOf('/');
  return slash < 0 ? '' : relativePath.slice(0, slash);
}

export async function packSource(input: PackInput): Promise<PackedTree> {
  /** An entry's mtime in the tree: its own, or the version's that a restore gave it (PackInput). */
  const mtimeInTree = (entry: { readonly path: string; readonly mtimeNs: bigint }) => {
    // Only a time of whole microseconds can be a restore's: no other entry is looked up.
    const inVersion = entry.mtimeNs % 1000n === 0n ? input.timeInVersion?.(entry.path) : undefined;
    return mtimeOf(
      inVersion !== undefined && isRestoredTimeOf(entry.mtimeNs, inVersion)
        ? inVersion
        : entry.mtimeNs,
    );
  };
  const leaves = new LeafSizes();
  const known = input.knownLeaves ? new LeafMarks(input.knownLeaves) : undefined;
  /** How many holdings of each of `leaves` the tree has, by its number there. */
  const leafUses = new UseCounts();
  /**
   * Leaves of files whose read failed part way, handed on already: those no other file holds
   * are strays.
   */
  const strayCandidates = new Set<number>();
  /**
   * Holds a leaf of the tree; true the first time for a leaf the known leaves lack, or, with
   * `resend`, for one they have too. A file being read notes its holdings in `holdings`, to
   * take them back should its read fail.
   */
  const holdLeaf = (cid: CID, size: number, resend = false, holdings?: LeafHoldings): boolean => {
    const knownLeaf = known ? known.mark(cid) : -1;
    if (knownLeaf >= 0) {
      holdings?.known.push(knownLeaf);
      if (!resend) return false;
    }
    const count = leaves.count;
    const leaf = leaves.addOrFind(cid, size);
    leafUses.use(leaf);
    holdings?.fresh.push(leaf);
    return leaf === count;
  };
  let fileCount = 0;
  let totalBytes = 0;
  const changedWhileRead: string[] = [];
  let bytesRead = 0;
  let filesReused = 0;
  /** Started at the first large file read, ended with the pack. */
  let hasher: ChunkHasher | undefined;
  const onEntry = input.onEntry ?? (() => undefined);
  const settingsLayout = unixfsImporterOptions().layout;
  if (!settingsLayout) throw new Error('the UnixFS settings name no layout');
  const layout = settingsLayout;

  /** The tree's nodes, in the tree's order whatever order they are made in. */
  const order = new NodeOrder(input.nodes);
  /** What the node builders write an entry's nodes to: its slot. */
  const blockstoreOf = (slot: NodeSink) => ({
    async put(cid: CID, bytes: Uint8Array): Promise<CID> {
      // Raw leaves come through putLeaf, which knows where they were read.
      if (cid.code !== DAG_PB_CODEC) throw new Error(`unexpected block codec ${cid.code}`);
      await slot.put(cid, bytes);
      return cid;
    },
  });

  /** Records a leaf the first time the tree holds it, and hands a new one to the caller. */
  async function putLeaf(
    cid: CID,
    bytes: Uint8Array,
    origin: LeafOrigin,
    holdings?: LeafHoldings,
  ): Promise<void> {
    if (!holdLeaf(cid, bytes.length, input.resendLeaves?.has(cid) === true, holdings)) return;
    await input.onLeaf(cid, bytes, origin, cidText(cid), leaves.count - 1);
  }

  /** Takes back what a file whose read failed part way held: it is not in the tree. */
  function letGo(holdings: LeafHoldings): void {
    for (const leaf of holdings.known) known?.unmark(leaf);
    for (const leaf of holdings.fresh) {
      leafUses.release(leaf);
      strayCandidates.add(leaf);
    }
  }

  /** A file's leaves, each made (read, hashed, handed on) when the file builder asks for it. */
  async function* leavesOf(
    file: ScannedFile,
    source: Exclude<FileSource, { kind: 'small' }>,
    list: LeafListBuilder,
    holdings: LeafHoldings | undefined,
  ): AsyncGenerator<LeafMaker> {
    if (source.kind === 'reused') {
      for (const leaf of source.leaves) list.add(leaf.cid);
      // The layout needs at least one leaf to make a File node at all; the empty leaf stays
      // out of the node's links, as the chunker's one empty chunk of an empty file does.
      const reused = source.leaves.length > 0 ? source.leaves : [{ cid: EMPTY_LEAF_CID, size: 0 }];
      for (const leaf of reused) {
        holdLeaf(leaf.cid, leaf.size);
        yield () => Promise.resolve({ cid: leaf.cid, size: BigInt(leaf.size) });
      }
      return;
    }
    const { fd } = source;
    let offset = 0;
    hasher ??= new ChunkHasher(2 * LARGE_FILES_AT_ONCE);
    // Each chunk is a view of a slot read into again: the file builder finishes a leaf (handed
    // to onLeaf, which is done with the bytes once it settles) before it asks for the next,
    // which is what lets the next read overwrite it.
    for await (const chunk of largeFileChunks(fd, file.size, hasher)) {
      throwIfStopped(input.signal);
      const origin = { path: file.path, offset };
      const { bytes } = chunk;
      offset += bytes.length;
      bytesRead += bytes.length;
      input.onBytesRead?.(bytes.length);
      const cid = cidFromSha256(RAW_CODEC, chunk.digest);
      if (bytes.length > 0) list.add(cid);
      yield async () => {
        await putLeaf(cid, bytes, origin, holdings);
        return { cid, size: BigInt(bytes.length) };
      };
    }
    await input.afterFileRead?.(file.path);
    // Only the bytes the scan saw were read: one more, or one fewer, shows in the size.
    const after = fstatSync(fd, { bigint: true });
    if (
      offset !== file.size ||
      Number(after.size) !== file.size ||
      after.mtimeNs !== file.mtimeNs ||
      after.ctimeNs !== file.ctimeNs
    )
      changedWhileRead.push(file.path);
  }

  /** What a file's folder keeps of its node, once the node is made. */
  function packedFile(
    file: ScannedFile,
    made: { cid: CID; size: bigint | number },
    leafList: Uint8Array,
    reused: boolean,
  ): FolderEntry {
    onEntry(packedEntryOf(file, { cid: cidText(made.cid), leaves: leafList }));
    input.onFilePacked?.(file, reused);
    // Its folder keeps it until the folder is made: a compact copy of the CID.
    return {
      name: nameOf(file.path),
      node: { cid: compactCid(made.cid), size: Number(made.size) },
    };
  }

  /**
   * A file of one leaf: its node written at once (node-bytes.ts). Most files of a tree are
   * this, and the iteration and objects buildFileNode goes through cost more than reading and
   * hashing them.
   */
  async function packOneLeafFile(
    file: ScannedFile,
    leaf: { cid: CID; size: number },
    reused: boolean,
    slot: NodeSlot,
  ): Promise<FolderEntry> {
    const node = oneLeafFileNode({ mode: file.mode, mtime: mtimeInTree(file) }, leaf);
    await slot.put(node.cid, node.bytes);
    return packedFile(file, node, oneLeafList(leaf), reused);
  }

  /** A file read whole: one leaf, hashed here. */
  async function packSmallFile(
    file: ScannedFile,
    bytes: Uint8Array,
    slot: NodeSlot,
  ): Promise<FolderEntry> {
    const cid = sha256CidOf(RAW_CODEC, bytes);
    await putLeaf(cid, bytes, { path: file.path, offset: 0 });
    return packOneLeafFile(file, { cid, size: bytes.length }, false, slot);
  }

  /**
   * A file's node, its nodes written to `slot`, which is closed once they all are; undefined
   * when a read of it failed part way (a damaged sector): it is skipped as a file that cannot
   * be opened is, and the folder is made without it. The leaves read before the failure were
   * handed on already: those no other file holds are the tree's strays.
   */
  async function packFile(
    file: ScannedFile,
    source: FileSource,
    slot: NodeSlot,
  ): Promise<FolderEntry | undefined> {
    // Only a file read chunk by chunk can fail part way, after it held leaves.
    const holdings: LeafHoldings | undefined =
      source.kind === 'large' ? { known: [], fresh: [] } : undefined;
    try {
      return await packFileNodes(file, source, slot, holdings);
    } catch (error) {
      if (!(error instanceof ChunkReadError) || !holdings) throw error;
      letGo(holdings);
      skipUnreadable(file, error.cause);
      fileCount -= 1;
      totalBytes -= file.size;
      return undefined;
    } finally {
      slot.close();
    }
  }

  async function packFileNodes(
    file: ScannedFile,
    source: FileSource,
    slot: NodeSlot,
    holdings: LeafHoldings | undefined,
  ): Promise<FolderEntry> {
    if (source.kind === 'small') return packSmallFile(file, source.bytes, slot);
    if (source.kind === 'reused' && source.leaves.length <= 1) {
      const leaf = source.leaves[0] ?? { cid: EMPTY_LEAF_CID, size: 0 };
      holdLeaf(leaf.cid, leaf.size);
      return packOneLeafFile(file, leaf, true, slot);
    }
    const list = new LeafListBuilder();
    const fileLeaves = leavesOf(file, source, list, holdings);
    try {
      const mtime = mtimeInTree(file);
      // A file being read keeps its nodes until its last chunk is read. Past 1024 leaves the
      // layout makes nodes as it goes, and a read failing after them left them in the tree's
      // CAR, where a later backup counts the leaves of every node as stored (readTree) though
      // none of them was sent. About 50 bytes per MiB of the file: 5 MB for a 100 GB image.
      const waiting: Array<{ cid: CID; bytes: Uint8Array }> = [];
      const store =
        source.kind === 'large'
          ? blockstoreOf({ put: (cid, bytes) => void waiting.push({ cid, bytes }) })
          : blockstoreOf(slot);
      const made = await buildFileNode({ mode: file.mode, mtime }, fileLeaves, store, layout);
      for (const node of waiting) await slot.put(node.cid, node.bytes);
      return packedFile(file, made, list.finish(), source.kind === 'reused');
    } finally {
      // Ended first, should the node have failed half way: a chunk read ahead may still be
      // running on the file (large-file-chunks.ts).
      await fileLeaves.return(undefined);
      if (source.kind === 'large') closeSync(source.fd);
    }
  }

  /** How long the packer's own reads of small files take. */
  const slowReads = new SlowReads();
  /** The small files walked; read ahead once the packer's reads wait on the disk. */
  const readAhead = new SmallFileReadAhead(
    input.sourceDir,
    SMALL_FILE_BYTES,
    (file) => input.reuse?.(file) === undefined,
  );
  const onWalked = (entry: SourceEntry): void => {
    if (entry.kind === 'file' && entry.size < SMALL_FILE_BYTES) readAhead.walked(entry);
  };

  /** A file's known leaves, when the caller knows it unchanged: it is not read. */
  function reusedSourceOf(file: ScannedFile): FileSource | undefined {
    const known = input.reuse?.(file);
    if (!known) return undefined;
    filesReused += 1;
    return { kind: 'reused', leaves: known };
  }

  /**
   * Reports a file that cannot be read, which is skipped instead of failing the pack; but a
   * disk that is gone fails it, since every file after would be skipped as well.
   */
  function skipUnreadable(file: ScannedFile, error: unknown): undefined {
    if (isDiskGone(error)) throw error;
    input.onSkip({ path: file.path, reason: unreadableReason(error), kind: skipKindOf(error) });
    return undefined;
  }

  /**
   * Where a small file's leaf comes from: read whole now; undefined when it is skipped.
   * A small file costs more in thread-pool round trips than in reading: it is read in
   * synchronous calls, a few microseconds each when it is in the page cache. Once such reads
   * are seen waiting on the disk, the files after it are read ahead (small-file-read-ahead.ts).
   */
  async function smallSourceOf(file: ScannedFile): Promise<FileSource | undefined> {
    readAhead.taken(file);
    const reused = reusedSourceOf(file);
    if (reused) return reused;
    let bytes: Uint8Array;
    try {
      const readStart = performance.now();
      // Its open and read are synchronous: they are done when the call returns.
      const reading = readSmallFile(path.join(input.sourceDir, file.path), file, () =>
        input.afterFileRead ? input.afterFileRead(file.path) : undefined,
      );
      if (slowReads.note(performance.now() - readStart)) readAhead.start();
      bytes = await reading;
    } catch (error) {
      if (!(error instanceof ChangedWhileRead)) return skipUnreadable(file, error);
      changedWhileRead.push(file.path);
      bytes = error.bytes;
    }
    bytesRead += bytes.length;
    input.onBytesRead?.(bytes.length);
    return { kind: 'small', bytes };
  }

  /**
   * Where a large file's leaves come from: opened now, in a metadata call of microseconds, so
   * that an unreadable or vanished file is skipped (undefined) before anything is read.
   */
  function largeSourceOf(file: ScannedFile): FileSource | undefined {
    const reused = reusedSourceOf(file);
    if (reused) return reused;
    try {
      const full = path.join(input.sourceDir, file.path);
      return { kind: 'large', fd: openSourceFile(full) };
    } catch (error) {
      return skipUnreadable(file, error);
    }
  }

  /** The folder's node, once every entry of it is made, written to `slot`, then closed. */
  async function makeFolder(folder: OpenFolder, slot: NodeSlot): Promise<FolderEntry> {
    const made: FolderEntry[] = [];
    let node: MadeNode;
    try {
      for (const entry of folder.entries) {
        const entryMade = await entry.made;
        if (entryMade) made.push(entryMade);
      }
      node = await makeFolderNode(folder.meta, made, blockstoreOf(slot));
    } finally {
      slot.close();
    }
    onEntry(packedEntryOf(folder.entry, { cid: cidText(node.cid), nodeSize: node.size }));
    return {
      name: nameOf(folder.entry.path),
      node,
      folder: { emptySize: emptyFolderSize(folder.meta), hasEntries: made.length > 0 },
    };
  }

  const { previousNodes, reuseFolder } = input;
  if (reuseFolder && (!previousNodes || !known))
    throw new Error("reusing folders needs the previous version's nodes and leaves");

  /** A folder reused whole: its entry in its parent. */
  async function reuse(entry: ScannedFolder, reused: ReusedFolder): Promise<FolderEntry> {
    const slot = order.next();
    try {
      await copyTreeNodes(reused.cid, {
        previousNodes: previousNodes ?? { get: () => undefined },
        sink: slot,
        markLeaf: (digest) => known?.markDigest(digest) === true,
      });
    } finally {
      slot.close();
    }
    fileCount += reused.files;
    totalBytes += reused.bytes;
    filesReused += reused.files;
    onEntry(packedEntryOf(entry, { cid: cidText(reused.cid), nodeSize: reused.size }));
    input.onFolderReused?.(entry, reused.files);
    const meta = { mode: entry.mode, mtime: mtimeInTree(entry) };
    return {
      name: nameOf(entry.path),
      node: { cid: reused.cid, size: reused.size },
      folder: { emptySize: emptyFolderSize(meta), hasEntries: reused.hasEntries },
    };
  }

  /** The first file or folder that failed to be made: the walk stops there. */
  let failure: Error | undefined;
  /**
   * Notes the failure of a file or folder being made. Each failure also reaches the folder
   * waiting on it, and so the root; noted here, it stops the walk at once, and Node does not
   * end the process over a promise that nothing awaits yet.
   */
  const watch = (making: Promise<unknown>): void => {
    making.catch((error: unknown) => {
      failure ??= error instanceof Error ? error : new Error(String(error));
    });
  };

  const rootEntry = sourceRootEntry(input.sourceDir);
  let settleRoot: (made: Promise<FolderEntry>) => void = () => undefined;
  const rootMade = new Promise<FolderEntry>((resolve) => {
    settleRoot = resolve;
  });
  watch(rootMade);
  const openFolders: OpenFolder[] = [
    {
      entry: rootEntry,
      meta: { mode: rootEntry.mode, mtime: mtimeInTree(rootEntry) },
      entries: [],
      settle: settleRoot,
    },
  ];
  /** Small or unchanged files being packed, at most FILES_AT_ONCE. */
  const packing = new Set<Promise<FolderEntry | undefined>>();
  /** Closes the open folders down to the one holding `relativePath`, deepest first. */
  const closeFoldersAbove = (relativePath: string): OpenFolder => {
    const parent = parentOf(relativePath);
    for (;;) {
      const folder = openFolders[openFolders.length - 1];
      if (!folder) throw new Error(`no open folder holds ${relativePath}`);
      if (folder.entry.path === parent) return folder;
      openFolders.pop();
      // Its place in the tree's order is here, after everything under it.
      folder.settle(makeFolder(folder, order.next()));
    }
  };
  /** The slots of files started before their turn, until the packing reaches them. */
  const earlySlots = new Map<SourceEntry, NodeSlot>();
  /** Folders the walk did not go into, by path, until the packing reaches them. */
  const reusedFolders = new Map<string, ReusedFolder>();
  const ahead = new WalkAhead<FolderEntry | undefined>(
    walkSource(input.sourceDir, {
      onSkip: input.onSkip,
      ...(reuseFolder
        ? {
            enters: (folder: ScannedFolder) => {
              const reused = reuseFolder(folder);
              if (reused) reusedFolders.set(folder.path, reused);
              return !reused;
            },
          }
        : {}),
      ...(input.rules ? { rules: input.rules } : {}),
      ...(input.onExcluded ? { onExcluded: input.onExcluded } : {}),
    }),
    {
      isEarly: (entry) => entry.kind === 'file' && entry.size >= SMALL_FILE_BYTES,
      start: (entry) => {
        if (entry.kind !== 'file') throw new Error(`${entry.path} is not a file`);
        const source = largeSourceOf(entry);
        if (!source) return undefined;
        // Its nodes are held until the packing reaches it, and places its slot.
        const slot = order.detached();
        earlySlots.set(entry, slot);
        const made = packFile(entry, source, slot);
        watch(made);
        return made;
      },
      aheadEntries: WALK_AHEAD_ENTRIES,
      atOnce: LARGE_FILES_AT_ONCE,
      onWalked,
    },
  );
  let rootNode: MadeNode;
  try {
    for (let item = await ahead.next(); item; item = await ahead.next()) {
      if (failure) throw failure;
      throwIfStopped(input.signal);
      const { entry } = item;
      const folder = closeFoldersAbove(entry.path);
      const name = nameOf(entry.path);
      const meta = { mode: entry.mode, mtime: mtimeInTree(entry) };
      switch (entry.kind) {
        case 'directory': {
          const reused = reusedFolders.get(entry.path);
          if (reused) {
            reusedFolders.delete(entry.path);
            folder.entries.push({ name, made: Promise.resolve(await reuse(entry, reused)) });
            break;
          }
          let settle: (made: Promise<FolderEntry>) => void = () => undefined;
          const made = new Promise<FolderEntry>((resolve) => {
            settle = resolve;
          });
          watch(made);
          folder.entries.push({ name, made });
          openFolders.push({ entry, meta, entries: [], settle });
          break;
        }
        case 'symlink': {
          onEntry(packedEntryOf(entry));
          const slot = order.next();
          let node: MadeNode;
          try {
            node = await makeSymlinkNode(meta, entry.target, blockstoreOf(slot));
          } finally {
            slot.close();
          }
          folder.entries.push({ name, made: Promise.resolve({ name, node }) });
          break;
        }
        case 'file': {
          let made: Promise<FolderEntry | undefined>;
          if (item.early) {
            // Started as it was walked, or now that those before it have room.
            const started = await ahead.started(item);
            const slot = earlySlots.get(entry);
            earlySlots.delete(entry);
            if (!started) break;
            if (!slot) throw new Error(`${entry.path} was started without a slot`);
            order.place(slot);
            made = started.made;
          } else {
            while (packing.size >= FILES_AT_ONCE) await Promise.race(packing);
            const source = await smallSourceOf(entry);
            if (!source) break;
            made = packFile(entry, source, order.next());
            watch(made);
            packing.add(made);
            const ended = (): boolean => packing.delete(made);
            void made.then(ended, ended);
          }
          fileCount += 1;
          totalBytes += entry.size;
          folder.entries.push({ name, made });
          break;
        }
        default: {
          const unreachable: never = entry;
          throw new Error(`unknown entry ${String(unreachable)}`);
        }
      }
    }
    closeFoldersAbove('');
    const root = openFolders.pop();
    if (!root) throw new Error('the source folder was closed early');
    root.settle(makeFolder(root, order.next()));
    rootNode = (await rootMade).node;
    await order.finish();
  } finally {
    // Files started ahead of their turn may wait for room behind slots never placed now.
    order.release();
    await ahead.close();
    // A pack that stopped early (a full staging disk) has files still being packed: they
    // close their files as they end, and their failures are this one's.
    await Promise.allSettled([...packing, ...ahead.inFlight]);
    await hasher?.close();
    await readAhead.close();
  }

  const manifestBytes = dagCbor.encode({
    version: 1,
    root: rootNode.cid,
    created_at: input.createdAtSeconds,
    device_fingerprint: input.deviceFingerprint,
    source_label: input.sourceLabel,
    file_count: fileCount,
    total_bytes: totalBytes,
  });
  const manifestCid = CID.createV1(dagCbor.code, await sha256.digest(manifestBytes));
  return {
    rootCid: rootNode.cid,
    manifestCid,
    manifestBytes,
    leaves,
    strayLeaves: [...strayCandidates].filter((leaf) => !leafUses.isUsed(leaf)),
    knownLeavesDropped: (limit) => known?.unmarked(limit) ?? [],
    fileCount,
    totalBytes,
    changedWhileRead,
    filesReused,
    bytesRead,
  };
}
