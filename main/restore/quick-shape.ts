import type { CID } from 'multiformats/cid';
import { DAG_PB_CODEC, DagPbLinks, protobufVarintAt, UNIXFS_TYPES } from '../protocol/index.ts';
import { shapeOfNode, type NodeLookup, type NodeShape } from './walk-tree.ts';

// A file's or a link's node read for what counting a tree needs (tree-totals.ts), straight from
// its bytes: whether it is a file, and its size as ipfs-unixfs gives it (the sizes of its
// blocks, and of the bytes it holds itself). @ipld/dag-pb and ipfs-unixfs make a CID for each
// link and an object for each field, and a restore, a verify or a listing of 300 000 files
// spent 1.9 s counting the tree before its first file.
//
// Only what is plainly of the shape the spec writes is read here: a node of another shape
// (a HAMT, a folder, a field of an unexpected kind, anything damaged) is undefined, and decoded
// whole instead, which says what is wrong with it.

/** The UnixFS Data fields counted (ipfs-unixfs's PBData): Data (2) and Blocksizes (4). */
const DATA_FIELD = 2;
const BLOCKSIZES_FIELD = 4;
/** Protobuf wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const FIXED32 = 5;

const reader = new DagPbLinks();

/**
 * The node `cid` as counting a tree needs it (shapeOfNode), read from its bytes where it is a
 * file's or a link's of the shape written, else decoded whole.
 */
export function shapeOfNodeQuickly(cid: CID, nodes: NodeLookup): NodeShape {
  const bytes = cid.code === DAG_PB_CODEC ? nodes.get(cid) : undefined;
  return (bytes && quickShapeOf(bytes)) ?? shapeOfNode(cid, nodes, bytes);
}

/** The shape of a file's or a link's node `bytes`; undefined for any other, or one not read here. */
export function quickShapeOf(bytes: Uint8Array): NodeShape | undefined {
  if (reader.read(bytes) < 0 || reader.dataLength < 0) return undefined;
  const type = reader.unixfsType;
  if (type !== UNIXFS_TYPES.file && type !== UNIXFS_TYPES.raw && type !== UNIXFS_TYPES.symlink)
    return undefined;
  const size = fileSizeIn(bytes, reader.dataAt, reader.dataAt + reader.dataLength);
  if (size === undefined) return undefined;
  return type === UNIXFS_TYPES.symlink ? { kind: 'symlink' } : { kind: 'file', size: BigInt(size) };
}

/**
 * The size the UnixFS Data at `start` to `end` of `bytes` states, as ipfs-unixfs's fileSize:
 * its blocks' sizes and the length of its own data. Undefined when any field is not as the spec
 * writes it: a wire type other than its own, packed block sizes, Data twice, or cut short.
 */
function fileSizeIn(bytes: Uint8Array, start: number, end: number): number | undefined {
  const cursor = { at: start };
  let size = 0;
  let hasData = false;
  while (cursor.at < end) {
    const tag = protobufVarintAt(bytes, cursor, end);
    if (tag < 0) return undefined;
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (wire === VARINT) {
      const value = protobufVarintAt(bytes, cursor, end);
      if (value < 0) return undefined;
      if (field === BLOCKSIZES_FIELD) size += value;
      else if (field === DATA_FIELD) return undefined;
    } else if (wire === LENGTH_DELIMITED) {
      const length = protobufVarintAt(bytes, cursor, end);
      if (length < 0 || field === BLOCKSIZES_FIELD) return undefined;
      if (field === DATA_FIELD) {
        if (hasData) return undefined;
        hasData = true;
        size += length;
      }
      cursor.at += length;
    } else if (wire === FIXED64 || wire === FIXED32) {
      if (field === DATA_FIELD || field === BLOCKSIZES_FIELD) return undefined;
      cursor.at += wire === FIXED64 ? 8 : 4;
    } else {
      return undefined;
    }
    if (cursor.at > end || size > Number.MAX_SAFE_INTEGER) return undefined;
  }
  return size;
}
