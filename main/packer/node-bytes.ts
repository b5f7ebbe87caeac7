import type { CID } from 'multiformats/cid';
import { DAG_PB_CODEC, sha256CidOf } from '../protocol/index.ts';

// The two nodes a tree holds most of, written byte by byte: a File node of one leaf (most
// files), and a plain folder's node. Made through `UnixFS` and `@ipld/dag-pb` objects, with
// their validation, sorting and a text encoding of every name on each comparison, these cost
// more than reading and hashing a small file does.
//
// The bytes are those of ipfs-unixfs 12 and @ipld/dag-pb 4, which the other nodes are still
// made with, and the tests compare the two across modes, times, sizes and names:
// - dag-pb (PBNode): every link (field 2), then Data (field 1); a link is Hash (1), Name (2),
//   Tsize (3), and the reducer's links have an empty Name, which is still written.
// - UnixFS Data: Type (1), fileSize (3) for files, one blockSize (4) per linked leaf, mode (7)
//   unless it is the type's default, mtime (8) as seconds (1, int64: ten bytes when negative)
//   and nanoseconds (2, fixed32).

/** A node made: its CID, its bytes, and the bytes under it (its Tsize in a parent's link). */
export interface NodeBlock {
  readonly cid: CID;
  readonly bytes: Uint8Array;
  readonly size: number;
}

export interface NodeMeta {
  readonly mode: number;
  readonly mtime: { readonly secs: bigint; readonly nsecs: number };
}

export interface NodeLink {
  readonly name: string;
  readonly cid: CID;
  readonly size: number;
}

const UNIXFS_DIRECTORY = 1;
const UNIXFS_FILE = 2;
const DEFAULT_FILE_MODE = 0o644;
const DEFAULT_FOLDER_MODE = 0o755;

/** Bytes of an unsigned varint. */
function varintLength(value: number): number {
  let length = 1;
  for (let rest = value; rest >= 128; rest = Math.floor(rest / 128)) length += 1;
  return length;
}

/** A message's bytes, written forward into a buffer that grows as needed. */
class ProtoWriter {
  bytes: Buffer;
  length = 0;

  constructor(capacity: number) {
    this.bytes = Buffer.allocUnsafe(capacity);
  }

  private reserve(count: number): void {
    if (this.length + count <= this.bytes.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.bytes.length * 2, this.length + count));
    this.bytes.copy(grown, 0, 0, this.length);
    this.bytes = grown;
  }

  byte(value: number): void {
    this.reserve(1);
    this.bytes[this.length++] = value;
  }

  /** An unsigned varint of a safe integer. */
  varint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`not a varint: ${value}`);
    this.reserve(10);
    let rest = value;
    while (rest >= 128) {
      this.bytes[this.length++] = (rest % 128) | 0x80;
      rest = Math.floor(rest / 128);
    }
    this.bytes[this.length++] = rest;
  }

  /** A signed 64-bit varint: two's complement, so ten bytes when negative. */
  int64(value: bigint): void {
    if (value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER)) {
      this.varint(Number(value));
      return;
    }
    this.reserve(10);
    let rest = BigInt.asUintN(64, value);
    while (rest >= 128n) {
      this.bytes[this.length++] = Number(rest & 0x7fn) | 0x80;
      rest >>= 7n;
    }
    this.bytes[this.length++] = Number(rest);
  }

  fixed32(value: number): void {
    this.reserve(4);
    this.bytes.writeUInt32LE(value >>> 0, this.length);
    this.length += 4;
  }

  raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.bytes.set(bytes, this.length);
    this.length += bytes.length;
  }

  /** A length-delimited field holding `bytes`. */
  field(tag: number, bytes: Uint8Array): void {
    this.byte(tag);
    this.varint(bytes.length);
    this.raw(bytes);
  }

  /** A copy of what was written, sized to it. */
  take(): Uint8Array {
    return Uint8Array.prototype.slice.call(this.bytes, 0, this.length);
  }
}

/** UnixFS's Data of a file or folder; `blockSize` only for a file of one linked leaf. */
function unixfsData(type: number, meta: NodeMeta, fileSize?: number): Uint8Array {
  const data = new ProtoWriter(48);
  data.byte(0x08);
  data.varint(type);
  if (type === UNIXFS_FILE) {
    data.byte(0x18);
    data.varint(fileSize ?? 0);
    // An empty file's leaf is not linked, and so has no block size.
    if (fileSize !== undefined && fileSize > 0) {
      data.byte(0x20);
      data.varint(fileSize);
    }
  }
  const mode = meta.mode & 0xfff;
  if (mode !== (type === UNIXFS_FILE ? DEFAULT_FILE_MODE : DEFAULT_FOLDER_MODE)) {
    data.byte(0x38);
    data.varint(mode);
  }
  const time = new ProtoWriter(16);
  time.byte(0x08);
  time.int64(meta.mtime.secs);
  time.byte(0x15);
  time.fixed32(meta.mtime.nsecs);
  data.field(0x42, time.take());
  return data.take();
}

/** Writes one link: Hash, Name (written even when empty) and Tsize. */
function writeLink(node: ProtoWriter, cidBytes: Uint8Array, name: Buffer, tsize: number): void {
  const inner =
    1 +
    varintLength(cidBytes.length) +
    cidBytes.length +
    1 +
    varintLength(name.length) +
    name.length +
    1 +
    varintLength(tsize);
  node.byte(0x12);
  node.varint(inner);
  node.field(0x0a, cidBytes);
  node.field(0x12, name);
  node.byte(0x18);
  node.varint(tsize);
}

const NO_NAME = Buffer.alloc(0);

/**
 * The File node of a file of one leaf, `leaf` being its raw leaf (an empty file's empty leaf
 * too, which stays out of the links).
 */
export function oneLeafFileNode(meta: NodeMeta, leaf: { cid: CID; size: number }): NodeBlock {
  const node = new ProtoWriter(128);
  if (leaf.size > 0) writeLink(node, leaf.cid.bytes, NO_NAME, leaf.size);
  node.field(0x0a, unixfsData(UNIXFS_FILE, meta, leaf.size));
  const bytes = node.take();
  return { cid: sha256CidOf(DAG_PB_CODEC, bytes), bytes, size: bytes.length + leaf.size };
}

/**
 * A plain (not sharded) folder's node, its links in the order given. Undefined when the names
 * are not in UTF-8 byte order, as dag-pb wants them: the caller then lets dag-pb sort them.
 */
export function plainFolderNode(meta: NodeMeta, links: readonly NodeLink[]): NodeBlock | undefined {
  const node = new ProtoWriter(256 + links.length * 64);
  let linkedBytes = 0;
  let previous: Buffer | undefined;
  for (const link of links) {
    const name = Buffer.from(link.name, 'utf8');
    if (previous !== undefined && Buffer.compare(previous, name) > 0) return undefined;
    previous = name;
    writeLink(node, link.cid.bytes, name, link.size);
    linkedBytes += link.size;
  }
  node.field(0x0a, unixfsData(UNIXFS_DIRECTORY, meta));
  const bytes = node.take();
  return { cid: sha256CidOf(DAG_PB_CODEC, bytes), bytes, size: bytes.length + linkedBytes };
}
