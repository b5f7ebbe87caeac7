import type { UnixFS } from 'ipfs-unixfs';

// A UnixFS node's Data, with its mtime written right. ipfs-unixfs 13 writes the mtime's seconds
// through protons-runtime 7, whose 64-bit varint keeps the low 32 bits signed: seconds from 2^31
// to 2^32 - 1 (2038-01-19 03:14:08 UTC to 2106-02-07) come out as a varint of 0 followed by four
// zero bytes, which reads back as 1970-01-01. A file with a time in 2038 or later came back from
// a restore dated 1970. (protons-runtime 8.0.1 has the same code.)
//
// So the Data is marshalled without its mtime, and the mtime appended here as protobuf has it:
// field 8, a message of seconds (field 1, int64: ten bytes when negative) and nanoseconds (field
// 2, fixed32, when given). mtime is the last field of the message, so the bytes are those a
// right encoder writes, and those ipfs-unixfs writes for any other time: CIDs do not change.

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

/** What `unixfs.marshal()` gives, with the mtime written right for every time. */
export function unixfsDataBytes(unixfs: UnixFS): Uint8Array {
  const { mtime } = unixfs;
  if (mtime === undefined) return unixfs.marshal();
  // Left out for the marshal alone: the node keeps it.
  delete unixfs.mtime;
  let rest: Uint8Array;
  try {
    rest = unixfs.marshal();
  } finally {
    unixfs.mtime = mtime;
  }
  const field = mtimeField(mtime);
  const bytes = new Uint8Array(rest.length + field.length);
  bytes.set(rest);
  bytes.set(field, rest.length);
  return bytes;
}
