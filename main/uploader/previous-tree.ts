import * as dagPb from '@ipld/dag-pb';
import { EngineError } from '../api/index.ts';
import {
  type CarBlock,
  CarFormatError,
  cidText,
  DAG_CBOR_CODEC,
  DAG_PB_CODEC,
  DagPbLinks,
  RAW_CODEC,
  readCar,
} from '../protocol/index.ts';
import * as dagCbor from '@ipld/dag-cbor';
import { UnixFS } from 'ipfs-unixfs';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { leavesOfList, LeafSizes, MetadataNodes } from '../packer/index.ts';
import type { CID } from 'multiformats/cid';
import { CarFileNodes } from './car-file-nodes.ts';

// Reads a version's metadata CAR (§17.2): the manifest, its dag-pb nodes, and every leaf its
// File nodes list. The CAR streams in and is never held whole. From a file, the nodes are read
// from it again when asked for (readTreeIndexOfFile); from a stream, they are copied out as they
// pass (readTreeIndex). A backup keeps the tree it builds on for as long as it packs; it needs
// the nodes only when its file index does not list the files' leaves (readTreeLeaves).

/** A tree's dag-pb nodes by CID: held in memory (MetadataNodes), or read from its CAR file. */
export interface TreeNodes {
  has(cid: CID): boolean;
  get(cid: CID): Uint8Array | undefined;
  getByText(text: string): Uint8Array | undefined;
}

/** Whether `error` says a version's metadata CAR is damaged (readTreeLeaves and the like). */
export function isDamagedMetadata(
  error: unknown,
): error is EngineError & { cause: CarFormatError } {
  return (
    error instanceof EngineError &&
    error.code === 'protocol' &&
    error.cause instanceof CarFormatError
  );
}

/** What a backup needs of the version it builds on: its manifest, and every leaf it holds. */
export interface TreeLeaves {
  readonly manifest: Record<string, unknown>;
  /** Every leaf the File nodes link to, with its size. */
  readonly leaves: LeafSizes;
  /** The tree's dag-pb nodes, when they were kept. */
  readonly nodes?: TreeNodes;
}

/** A version's tree whole: enough to browse, restore or verify it. */
export interface TreeIndex extends TreeLeaves {
  readonly nodes: TreeNodes;
}

/** A TreeIndex whose nodes are read from its metadata CAR file, open until `close`. */
export interface TreeIndexOfFile extends TreeIndex {
  close(): void;
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield await Promise.resolve(bytes);
}

export async function readTreeIndex(
  car: Uint8Array | AsyncIterable<Uint8Array>,
): Promise<TreeIndex> {
  const nodes = new MetadataNodes();
  const tree = await readTree(car, { keepNode: (block) => nodes.put(block.cid, block.bytes) });
  return { manifest: tree.manifest, leaves: tree.leaves, nodes };
}

/**
 * readTreeIndex for a metadata CAR in a file, whose nodes are read from it when asked for
 * (CarFileNodes) rather than held: the caller closes it once done with the tree.
 */
export async function readTreeIndexOfFile(
  file: string,
  onRead?: CarFileReading,
): Promise<TreeIndexOfFile> {
  // Every node is checked as the CAR is read here, from the file the nodes are read from.
  const nodes = new CarFileNodes(file, { checkReads: false });
  try {
    const tree = await readTree(metadataCarStream(file, onRead), {
      keepNode: (block) => nodes.put(block.cid, block.offset, block.length),
    });
    return { manifest: tree.manifest, leaves: tree.leaves, nodes, close: () => nodes.close() };
  } catch (error) {
    nodes.close();
    throw error;
  }
}

/** The manifest and the leaves of a version's tree, without keeping its nodes. */
export async function readTreeLeaves(
  car: Uint8Array | AsyncIterable<Uint8Array>,
): Promise<TreeLeaves> {
  const { manifest, leaves } = await readTree(car, {});
  return { manifest, leaves };
}

/** readTreeLeaves for a metadata CAR in a file; `onRead` is told of its reads. */
export function readTreeLeavesOfFile(file: string, onRead?: CarFileReading): Promise<TreeLeaves> {
  return readTreeLeaves(metadataCarStream(file, onRead));
}

/**
 * Takes the bytes of a metadata CAR file read so far, and the file's size: a tree of 300 000
 * files has a CAR of 50 MB, read and checked in over 2 s.
 */
export type CarFileReading = (bytesRead: number, carBytes: number) => void;

/**
 * A metadata CAR file as a stream: a tree of many files has one of tens of megabytes. With
 * `onRead`, told of each piece read.
 */
export function metadataCarStream(
  file: string,
  onRead?: CarFileReading,
): AsyncIterable<Uint8Array> {
  return onRead ? countedReads(file, onRead) : carFileStream(file);
}

function carFileStream(file: string): AsyncIterable<Buffer> {
  return createReadStream(file, { highWaterMark: 1 << 20 });
}

async function* countedReads(file: string, onRead: CarFileReading): AsyncGenerator<Uint8Array> {
  const carBytes = (await stat(file)).size;
  let bytesRead = 0;
  for await (const piece of carFileStream(file)) {
    bytesRead += piece.length;
    // A file that grew since (it does not, once cached) is told as what was read.
    onRead(bytesRead, Math.max(carBytes, bytesRead));
    yield piece;
  }
}

/** What readTree found in a metadata CAR. */
export interface ReadTree {
  readonly manifest: Record<string, unknown>;
  /** The manifest block: its CID and where it lies in the CAR. */
  readonly manifestBlock: { readonly cid: CID; readonly offset: number; readonly length: number };
  /** Every leaf the File nodes link to; empty when they were not asked for. */
  readonly leaves: LeafSizes;
}

export async function readTree(
  car: Uint8Array | AsyncIterable<Uint8Array>,
  options: {
    /** Takes each dag-pb node, when the nodes are kept. */
    keepNode?: (block: CarBlock) => void;
    /** Whether to list the leaves (default true): browsing needs none. */
    leaves?: boolean;
  },
): Promise<ReadTree> {
  const { keepNode } = options;
  const wantsLeaves = options.leaves ?? true;
  const leaves = new LeafSizes();
  const links = new DagPbLinks();
  let manifest: Record<string, unknown> | undefined;
  let manifestBlock: ReadTree['manifestBlock'] | undefined;
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
        manifestBlock = { cid: item.cid, offset: item.offset, length: item.length };
      } else if (item.cid.code === DAG_PB_CODEC) {
        keepNode?.(item);
        if (!wantsLeaves) continue;
        const count = links.read(item.bytes);
        for (let link = 0; link < count; link++) {
          if (links.codecs[link] === RAW_CODEC)
            leaves.addDigest(links.digest(link), links.tsizes[link] ?? 0);
        }
        // Not a node this client writes: decoded the slow way.
        if (count < 0)
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
  if (!manifest || !manifestBlock || manifest['version'] !== 1) {
    throw new EngineError('protocol', "a version's manifest is missing or of an unknown version");
  }
  return { manifest, manifestBlock, leaves };
}

/**
 * The leaves of a file from its leaf list (in the file index), or undefined when the list does
 * not fit `size` or the tree lacks one of them: only leaves the version holds are stored.
 */
export function listedLeavesInTree(
  tree: TreeLeaves,
  list: Uint8Array,
  size: number,
): Array<{ cid: CID; size: number }> | undefined {
  const leaves = leavesOfList(list, size);
  if (!leaves?.every((leaf) => tree.leaves.sizeOf(leaf.cid) === leaf.size)) return undefined;
  return leaves;
}

/**
 * The leaves, in order, under a File node of the tree, or undefined when the node is not in
 * the tree (or its nodes were not kept), is not a File, or does not add up to `expectedSize`.
 * Leaves of a node the active version holds are stored, so a file that still matches it needs
 * none of its bytes read.
 */
export function leavesOfFile(
  tree: TreeLeaves,
  fileCid: string,
  expectedSize: number,
): Array<{ cid: CID; size: number }> | undefined {
  const out: Array<{ cid: CID; size: number }> = [];
  const visit = (cid: CID | string, depth: number): boolean => {
    const bytes = typeof cid === 'string' ? tree.nodes?.getByText(cid) : tree.nodes?.get(cid);
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
