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

/** Protobuf wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const FIXED32 = 5;
/** UnixFS Data fields (ipfs-unixfs's PBData) read here: Type, Data, Blocksizes, Mode, Mtime. */
const TYPE_FIELD = 1;
const DATA_FIELD = 2;
const BLOCKSIZES_FIELD = 4;
const MODE_FIELD = 7;
const MTIME_FIELD = 8;
/**
 * The wire type of each field of PBData, by number (1 to 8). ipfs-unixfs's decoder (protons)
 * reads a field it knows as its own type whatever wire type its tag gives, so a field of
 * another wire type means something else to it than to a reader that skips it by that type.
 */
const WIRE_OF_FIELD = [
  -1,
  VARINT,
  LENGTH_DELIMITED,
  VARINT,
  VARINT,
  VARINT,
  VARINT,
  VARINT,
  LENGTH_DELIMITED,
];
/** UnixTime's fields, as tags: Seconds (1, a varint) and FractionalNanoseconds (2, fixed32). */
const SECONDS_TAG = (1 << 3) | VARINT;
const NANOSECONDS_TAG = (2 << 3) | FIXED32;

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
 * writes it: a known field of another wire type, packed block sizes, Data twice, a Type after
 * the first field (the one DagPbLinks read; ipfs-unixfs takes the last), a time not whole, or
 * cut short.
 */
function fileSizeIn(bytes: Uint8Array, start: number, end: number): number | undefined {
  const cursor = { at: start };
  let size = 0;
  let hasData = false;
  for (let first = true; cursor.at < end; first = false) {
    const tag = uint32At(bytes, cursor, end);
    if (tag < 0) return undefined;
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (field < WIRE_OF_FIELD.length && wire !== WIRE_OF_FIELD[field]) return undefined;
    if (field === TYPE_FIELD && !first) return undefined;
    if (wire === VARINT) {
      // Type (an enum) and Mode are fields of 32 bits, which protons reads as uint32At does.
      const value =
        field === TYPE_FIELD || field === MODE_FIELD
          ? uint32At(bytes, cursor, end)
          : protobufVarintAt(bytes, cursor, end);
      if (value < 0) return undefined;
      if (field === BLOCKSIZES_FIELD) size += value;
    } else if (wire === LENGTH_DELIMITED) {
      const length = uint32At(bytes, cursor, end);
      if (length < 0) return undefined;
      const fieldEnd = cursor.at + length;
      if (field === DATA_FIELD) {
        if (hasData) return undefined;
        hasData = true;
        size += length;
      } else if (field === MTIME_FIELD && !wholeTime(bytes, cursor.at, fieldEnd)) {
        // ipfs-unixfs's decoder reads a time cut short on into the fields after it.
        return undefined;
      }
      cursor.at = fieldEnd;
    } else if (wire === FIXED64 || wire === FIXED32) {
      cursor.at += wire === FIXED64 ? 8 : 4;
    } else {
      return undefined;
    }
    if (cursor.at > end || size > Number.MAX_SAFE_INTEGER) return undefined;
  }
  return size;
}

/** Whether `start` to `end` of `bytes` is a UnixTime of its two fields, each whole within it. */
function wholeTime(bytes: Uint8Array, start: number, end: number): boolean {
  if (end > bytes.length) return false;
  const cursor = { at: start };
  while (cursor.at < end) {
    const tag = uint32At(bytes, cursor, end);
    if (tag === SECONDS_TAG) {
      if (protobufVarintAt(bytes, cursor, end) < 0) return false;
    } else if (tag === NANOSECONDS_TAG) {
      cursor.at += 4;
    } else {
      return false;
    }
  }
  return cursor.at === end;
}

/**
 * A varint of 32 bits at `cursor.at`, moved past it; -1 when cut short before `end`, or longer
 * or larger than 32 bits. protons reads tags, lengths and fields of 32 bits so: of a fifth
 * byte, only its low four bits, and after a fifth byte that goes on, five more bytes whatever
 * they are, where a reader of the whole varint stops elsewhere.
 */
function uint32At(bytes: Uint8Array, cursor: { at: number }, end: number): number {
  const start = cursor.at;
  const value = protobufVarintAt(bytes, cursor, end);
  return value < 0 || value > 0xffff_ffff || cursor.at - start > 5 ? -1 : value;
}
