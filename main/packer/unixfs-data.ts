import type { UnixFS } from 'ipfs-unixfs';

// A UnixFS node's Data, with its 64-bit numbers written right. ipfs-unixfs 13 writes them
// through protons-runtime 7, whose 64-bit varint keeps the low 32 bits signed: a value from 2^31
// to 2^32 - 1 comes out as a varint of 0 followed by four zero bytes. So a file of 2 to 4 GiB
// had a filesize of 0 in its File node (ipfs-unixfs reads the size from the block sizes, other
// tools from that field), and an mtime from 2038-01-19 03:14:08 UTC to 2106-02-07 read back as
// 1970: a restore dated such a file, folder or symlink 1970. (protons-runtime 8.0.1 has the same
// code.)
//
// So the Data of the nodes made here is written here, field by field, as ipfs-unixfs's marshal
// writes it: Type (1), Data (2) when not empty, filesize (3) for a file, one blocksize (4) each,
// hashType (5) and fanout (6) when set, mode (7) unless the type's default, mtime (8) as seconds
// (1, int64: ten bytes when negative) and nanoseconds (2, fixed32, when set). The bytes are those
// ipfs-unixfs writes for every value it gets right: CIDs do not change.

/** Bytes of `value` as an unsigned varint; `value` is below 2^64. */
function varint(value: bigint): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80n) {
    bytes.push(Number(rest & 0x7fn) | 0x80);
    rest >>= 7n;
  }
  bytes.push(Number(rest));
  return bytes;
}

/** The mtime field (8) of a UnixFS Data message. */
function mtimeField(mtime: NonNullable<UnixFS['mtime']>): Uint8Array {
  const time = [0x08, ...varint(BigInt.asUintN(64, mtime.secs))];
  if (mtime.nsecs !== undefined) {
    const nsecs = Buffer.alloc(4);
    nsecs.writeUInt32LE(mtime.nsecs >>> 0);
    time.push(0x15, ...nsecs);
  }
  return Uint8Array.from([0x42, ...varint(BigInt(time.length)), ...time]);
}

/** A varint's value and the offset after it, read from `bytes` at `offset`. */
function readVarint(bytes: Uint8Array, offset: number): { value: bigint; next: number } {
  let value = 0n;
  let shift = 0n;
  for (let at = offset; at < bytes.length && shift < 70n; at += 1) {
    const byte = bytes[at] ?? 0;
    value |= BigInt(byte & 0x7f) << shift;
    if (byte < 0x80) return { value, next: at + 1 };
    shift += 7n;
  }
  throw new Error('a UnixFS Data message ends in the middle of a varint');
}

/**
 * A UnixFS Data message (`data`) with its mtime field given `mtime`, written right: every other
 * field as it was, in its order, the mtime last. For a node another writer marshalled, whose
 * fields a decode and marshal would not all keep (ipfs-unixfs drops a HAMT shard's hashType).
 */
export function withMtime(data: Uint8Array, mtime: NonNullable<UnixFS['mtime']>): Uint8Array {
  const kept: Uint8Array[] = [];
  let offset = 0;
  while (offset < data.length) {
    const start = offset;
    const tag = readVarint(data, offset);
    offset = tag.next;
    switch (Number(tag.value & 7n)) {
      case 0:
        offset = readVarint(data, offset).next;
        break;
      case 1:
        offset += 8;
        break;
      case 2: {
        const length = readVarint(data, offset);
        offset = length.next + Number(length.value);
        break;
      }
      case 5:
        offset += 4;
        break;
      default:
        throw new Error(`a UnixFS Data message has a field of wire type ${tag.value & 7n}`);
    }
    if (offset > data.length)
      throw new Error('a UnixFS Data message ends in the middle of a field');
    if (tag.value >> 3n !== 8n) kept.push(data.subarray(start, offset));
  }
  return Buffer.concat([...kept, mtimeField(mtime)]);
}

/** UnixFS's Type enum (unixfs.proto). */
const TYPE_NUMBERS: Readonly<Record<string, number>> = {
  raw: 0,
  directory: 1,
  file: 2,
  metadata: 3,
  symlink: 4,
  'hamt-sharded-directory': 5,
};
const DEFAULT_FILE_MODE = 0o644;
const DEFAULT_FOLDER_MODE = 0o755;

/**
 * What `unixfs.marshal()` gives, with every 64-bit number written right, for a node made with
 * UnixFS's constructor (one decoded may keep mode bits above 0o7777, which this leaves out).
 */
export function unixfsDataBytes(unixfs: UnixFS): Uint8Array {
  const type = TYPE_NUMBERS[unixfs.type];
  if (type === undefined) throw new Error(`no UnixFS type ${unixfs.type}`);
  const out: number[] = [0x08, ...varint(BigInt(type))];
  const { data } = unixfs;
  const parts: Uint8Array[] = [];
  if (data !== undefined && data.length > 0) {
    out.push(0x12, ...varint(BigInt(data.length)));
    parts.push(Uint8Array.from(out), data);
    out.length = 0;
  }
  if (unixfs.type === 'file' || unixfs.type === 'raw') out.push(0x18, ...varint(unixfs.fileSize()));
  for (const size of unixfs.blockSizes) out.push(0x20, ...varint(size));
  if (unixfs.hashType !== undefined) out.push(0x28, ...varint(unixfs.hashType));
  if (unixfs.fanout !== undefined) out.push(0x30, ...varint(unixfs.fanout));
  const mode = unixfs.mode;
  if (
    mode !== undefined &&
    mode !== (unixfs.isDirectory() ? DEFAULT_FOLDER_MODE : DEFAULT_FILE_MODE)
  )
    out.push(0x38, ...varint(BigInt(mode)));
  parts.push(Uint8Array.from(out));
  if (unixfs.mtime !== undefined) parts.push(mtimeField(unixfs.mtime));
  return Buffer.concat(parts);
}
