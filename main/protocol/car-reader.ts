import * as dagCbor from '@ipld/dag-cbor';
import { CID } from 'multiformats/cid';
import { Digest } from 'multiformats/hashes/digest';
import { cidText, isProtocolCid, PROTOCOL_CID_BYTES, RAW_CODEC } from './cid.ts';
import { sha256OfPieces } from './sha256-of.ts';

// A streaming CAR reader that treats every CAR as hostile (§16.8). @ipld/car's decoder reads a
// section's full length before it can be judged, so a lying varint would make it buffer up to
// the body limit; this reader checks every length against its bound before reading the bytes,
// verifies every block against its CID as it goes, and never holds more than one block.
// readCarCheckingLater alone hands large raw blocks on unchecked, for a caller that checks them
// itself where it copies their bytes anyway (a restore's file writes).

export type CarFaultKind = 'malformed' | 'block_too_large';

export class CarFormatError extends Error {
  readonly kind: CarFaultKind;
  /** The block whose bytes do not match its CID, when that is the fault. */
  readonly mismatchedCid: string | undefined;

  constructor(kind: CarFaultKind, message: string, mismatchedCid?: string) {
    super(message);
    this.name = 'CarFormatError';
    this.kind = kind;
    this.mismatchedCid = mismatchedCid;
  }
}

export interface CarReadLimits {
  /** Largest block payload accepted; a larger one is `block_too_large` (413). */
  readonly maxBlockBytes: number;
  /** Largest header accepted. Roots are few; a huge header is hostile. */
  readonly maxHeaderBytes?: number;
  /** CARv2 is accepted only where the spec says so (the metadata push). */
  readonly allowV2?: boolean;
}

export interface CarHeaderItem {
  readonly type: 'header';
  readonly roots: readonly CID[];
  readonly version: 1 | 2;
}

export type CarItem = CarHeaderItem | CarBlock;

/**
 * A block read from a CAR, already checked against its CID. Its bytes come as the pieces they
 * arrived in (views of the received chunks, usually about 64 KiB each), so a reader that can
 * take pieces (a writev) need not have them copied into one buffer: on a restore, that copy
 * was a third of all the memory allocated, and of the garbage collections it set off.
 */
export class CarBlock {
  readonly type = 'block';
  private joined: Uint8Array | undefined;

  constructor(
    readonly cid: CID,
    readonly pieces: readonly Uint8Array[],
    /** The bytes in all the pieces. */
    readonly length: number,
    /** Where the bytes start in the stream read, counted from its first byte. */
    readonly offset: number,
  ) {}

  /** The bytes as one buffer: the only piece, or the pieces copied together, once. */
  get bytes(): Uint8Array {
    this.joined ??= this.pieces.length === 1 ? this.pieces[0] : Buffer.concat(this.pieces);
    return this.joined ?? new Uint8Array(0);
  }
}

/**
 * A raw block read from a CAR, its bytes not yet checked against its CID: readCarCheckingLater
 * hands large ones on so. Until its taker has checked it, by `check()` or by comparing the
 * SHA-256 of its bytes with `expectedDigest`, it is not a block received, only bytes.
 */
export class UncheckedCarBlock {
  readonly type = 'unchecked-block';

  constructor(
    readonly cid: CID,
    readonly pieces: readonly Uint8Array[],
    /** The bytes in all the pieces. */
    readonly length: number,
    /** Where the bytes start in the stream read, counted from its first byte. */
    readonly offset: number,
  ) {}

  /** The SHA-256 the bytes must have: the CID's digest. */
  get expectedDigest(): Uint8Array {
    return this.cid.multihash.digest;
  }

  /** The block, hashed here; a CarFormatError naming its CID when the bytes do not match. */
  check(): CarBlock {
    return checkedBlock(this.cid, this.pieces, this.length, this.offset);
  }
}

/** The CarFormatError of a block whose bytes do not hash to its CID. */
export function mismatchedBlock(cid: CID): CarFormatError {
  const text = cidText(cid);
  return new CarFormatError('malformed', `block bytes do not match ${text}`, text);
}

function checkedBlock(
  cid: CID,
  pieces: readonly Uint8Array[],
  length: number,
  offset: number,
): CarBlock {
  if (!Buffer.from(cid.multihash.digest).equals(sha256OfPieces(pieces))) throw mismatchedBlock(cid);
  return new CarBlock(cid, pieces, length, offset);
}

/** What a section's bytes become: a checked block, or for readCarCheckingLater maybe not yet. */
type BlockOf<Block> = (
  cid: CID,
  pieces: readonly Uint8Array[],
  length: number,
  offset: number,
) => Block;

const MAX_VARINT_BYTES = 8; // 56 bits: more than any length we accept, less than 2^53.
/** Version, codec, hash code and digest length as varints, then a sha2-256 digest. */
const MAX_CID_BYTES = 4 * MAX_VARINT_BYTES + 32;
const DEFAULT_MAX_HEADER = 64 * 1024;
const V2_HEADER_BYTES = 40;

function malformed(message: string): CarFormatError {
  return new CarFormatError('malformed', message);
}

/** Pulls exact byte counts out of an async stream of chunks. */
class ByteReader {
  private readonly source: AsyncIterator<Uint8Array>;
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  private ended = false;
  /** Bytes handed out so far. */
  position = 0;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.source = source[Symbol.asyncIterator]();
  }

  /** Buffers up to `count` bytes; returns how many are available (fewer only at the end). */
  private async fill(count: number): Promise<number> {
    while (this.buffered < count && !this.ended) {
      const next = await this.source.next();
      if (next.done === true) {
        this.ended = true;
      } else if (next.value.length > 0) {
        this.chunks.push(next.value);
        this.buffered += next.value.length;
      }
    }
    return Math.min(this.buffered, count);
  }

  async isAtEnd(): Promise<boolean> {
    return (await this.fill(1)) === 0;
  }

  /** Bytes buffered and not yet handed out. */
  get available(): number {
    return this.buffered;
  }

  /**
   * The front chunk, if it holds at least `count` bytes: bytes to parse in place without
   * waiting. A section of a small block usually lies whole in one received chunk, and parsing
   * it without an await per field took the promises, and much of the time, out of reading it.
   */
  front(count: number): Uint8Array | undefined {
    const first = this.chunks[0];
    return first !== undefined && first.length >= count ? first : undefined;
  }

  /**
   * At least `count` bytes at the front as one contiguous view, fewer only where the stream
   * ends, without consuming them. Varints and CIDs are parsed from it in place: reading them a
   * byte at a time cost a promise and a view per byte, most of the reader's garbage.
   */
  async peek(count: number): Promise<Uint8Array> {
    const available = await this.fill(count);
    // Bytes that straddle chunks are joined into one; at most once per chunk boundary.
    while ((this.chunks[0]?.length ?? 0) < available) {
      const [first = new Uint8Array(0), second = new Uint8Array(0)] = this.chunks;
      this.chunks.splice(0, 2, Buffer.concat([first, second]));
    }
    return this.chunks[0] ?? new Uint8Array(0);
  }

  /** Drops `count` bytes from the front; they must be buffered (peeked) already. */
  consume(count: number): void {
    this.position += count;
    this.buffered -= count;
    let left = count;
    while (left > 0) {
      const chunk = this.chunks[0];
      if (!chunk) throw new Error('consumed more than was buffered');
      if (chunk.length <= left) {
        this.chunks.shift();
        left -= chunk.length;
      } else {
        this.chunks[0] = chunk.subarray(left);
        left = 0;
      }
    }
  }

  async readExactly(count: number, what: string): Promise<Uint8Array> {
    if ((await this.fill(count)) < count) throw malformed(`truncated ${what}`);
    const first = this.chunks[0];
    if (first && first.length >= count) {
      const out = first.subarray(0, count);
      this.consume(count);
      return out;
    }
    // Every byte is overwritten below, so the buffer need not be zeroed first.
    const out = Buffer.allocUnsafeSlow(count);
    let filled = 0;
    for (const chunk of this.chunks) {
      const take = Math.min(chunk.length, count - filled);
      out.set(take === chunk.length ? chunk : chunk.subarray(0, take), filled);
      filled += take;
      if (filled === count) break;
    }
    this.consume(count);
    return out;
  }

  /** `count` bytes as views of the chunks they arrived in, without copying them. */
  async readPieces(count: number, what: string): Promise<Uint8Array[]> {
    if ((await this.fill(count)) < count) throw malformed(`truncated ${what}`);
    return this.takePieces(count);
  }

  /** readPieces of bytes buffered already (`available` at least `count`). */
  takePieces(count: number): Uint8Array[] {
    const pieces: Uint8Array[] = [];
    let left = count;
    for (const chunk of this.chunks) {
      if (left === 0) break;
      pieces.push(chunk.length <= left ? chunk : chunk.subarray(0, left));
      left -= Math.min(chunk.length, left);
    }
    this.consume(count);
    return pieces;
  }

  /** Reads a minimal unsigned LEB128 varint of at most 8 bytes. */
  async readVarint(what: string): Promise<number> {
    const { value, length } = varintAt(await this.peek(MAX_VARINT_BYTES), 0, what);
    this.consume(length);
    return value;
  }

  /** Reads and discards everything left in the stream. */
  async drain(): Promise<void> {
    while ((await this.fill(1 << 20)) > 0) {
      this.position += this.buffered;
      this.buffered = 0;
      this.chunks = [];
    }
  }

  async skip(count: number, what: string): Promise<void> {
    let left = count;
    while (left > 0) {
      const step = Math.min(left, 1 << 20);
      await this.readExactly(step, what);
      left -= step;
    }
  }
}

/** The minimal unsigned LEB128 varint of at most 8 bytes at `offset` of `bytes`. */
function varintAt(
  bytes: Uint8Array,
  offset: number,
  what: string,
): { value: number; length: number } {
  let value = 0;
  for (let index = 0; index < MAX_VARINT_BYTES; index += 1) {
    const byte = bytes[offset + index];
    if (byte === undefined) throw malformed(`truncated ${what}`);
    value += (byte & 0x7f) * 2 ** (7 * index);
    if ((byte & 0x80) === 0) {
      if (byte === 0 && index > 0) throw malformed(`non-minimal varint in ${what}`);
      return { value, length: index + 1 };
    }
  }
  throw malformed(`oversized varint in ${what}`);
}

function decodeHeader(bytes: Uint8Array): { version: number; roots: CID[] } {
  let value: unknown;
  try {
    value = dagCbor.decode(bytes);
  } catch {
    throw malformed('header is not DAG-CBOR');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw malformed('header is not a map');
  }
  const header = value as Record<string, unknown>;
  const version = header['version'];
  if (version === 2 && Object.keys(header).length === 1) return { version: 2, roots: [] };
  if (version !== 1) throw malformed('unsupported CAR version');
  const roots = header['roots'];
  if (!Array.isArray(roots) || Object.keys(header).length !== 2) {
    throw malformed('header has no roots array');
  }
  const cids: CID[] = [];
  for (const root of roots) {
    const cid = CID.asCID(root);
    if (!cid) throw malformed('a root is not a CID');
    cids.push(cid);
  }
  return { version: 1, roots: cids };
}

function readUint64LE(bytes: Uint8Array, offset: number): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const value = view.getBigUint64(offset, true);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed('CARv2 offset out of range');
  return Number(value);
}

/** The §3 CID at `offset` of `head`, and its length; `head` is at least as long as it is. */
function cidAt(head: Uint8Array, start: number): { cid: CID; length: number } {
  let offset = start;
  const field = (): number => {
    const { value, length } = varintAt(head, offset, 'block CID');
    offset += length;
    return value;
  };
  const version = field();
  const codec = field();
  const hashCode = field();
  const digestLength = field();
  if (version !== 1) throw malformed('block CID is not CIDv1');
  if (digestLength !== 32) throw malformed('block CID digest is not 32 bytes');
  if (hashCode !== 0x12) throw malformed('block CID hash is not sha2-256');
  const length = offset - start + digestLength;
  if (head.length < start + length) throw malformed('truncated block CID');
  // Every §3 CID is four one-byte varints and the digest; longer means a codec §3 does not
  // allow, or a varint spelt with more bytes than it needs.
  if (length !== PROTOCOL_CID_BYTES) throw malformed('block CID breaks §3');
  // A copy (from Node's shared pool): a view would keep the whole received chunk alive as long
  // as the CID. Made directly rather than by CID.decode, which allocates its bytes once more:
  // a metadata CAR holds a CID per file, tens of thousands.
  const bytes = Buffer.from(head.subarray(start, start + length));
  const cid = new CID(
    1,
    codec,
    new Digest(hashCode, digestLength, bytes.subarray(4), bytes.subarray(2)),
    bytes,
  );
  if (!isProtocolCid(cid)) throw malformed('block CID breaks §3');
  return { cid, length };
}

export function encodeVarint(value: number): Uint8Array {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
  return new Uint8Array(out);
}

/** A section's length varint and its CID, at most. */
const SECTION_HEAD_BYTES = MAX_VARINT_BYTES + MAX_CID_BYTES;

async function* readSections<Block>(
  reader: ByteReader,
  limits: CarReadLimits,
  endPosition: number | undefined,
  blockOf: BlockOf<Block>,
): AsyncGenerator<Block> {
  for (;;) {
    if (endPosition === undefined) {
      if (reader.available === 0 && (await reader.isAtEnd())) return;
    } else if (reader.position >= endPosition) return;
    // Fewer bytes than a head only where the stream ends: the parse below then says what is cut.
    const head = reader.front(SECTION_HEAD_BYTES) ?? (await reader.peek(SECTION_HEAD_BYTES));
    const { value: sectionLength, length: varintLength } = varintAt(head, 0, 'section length');
    const sectionStart = reader.position + varintLength;
    if (sectionLength === 0) throw malformed('empty section');
    const { cid, length: cidLength } = cidAt(head, varintLength);
    reader.consume(varintLength + cidLength);
    const blockLength = sectionLength - cidLength;
    if (blockLength < 0) throw malformed('section shorter than its CID');
    if (blockLength > limits.maxBlockBytes) {
      throw new CarFormatError(
        'block_too_large',
        `block ${cid.toString()} is over the block limit`,
      );
    }
    if (endPosition !== undefined && sectionStart + sectionLength > endPosition) {
      throw malformed('section runs past the CARv2 data');
    }
    const offset = reader.position;
    const pieces =
      reader.available >= blockLength
        ? reader.takePieces(blockLength)
        : await reader.readPieces(blockLength, 'block');
    yield blockOf(cid, pieces, blockLength, offset);
  }
}

/**
 * Reads a CAR from a stream: first a `header` item, then one `block` item per section, each
 * already checked against its CID. Throws CarFormatError at the first offending byte.
 */
export function readCar(
  source: AsyncIterable<Uint8Array>,
  limits: CarReadLimits,
): AsyncGenerator<CarItem> {
  return readItems(source, limits, checkedBlock);
}

/**
 * readCar, except that raw blocks of at least `uncheckedFrom` bytes come unchecked, for the
 * caller to check (UncheckedCarBlock): it may hash them off its thread, where it copies them.
 * Every other check (lengths, limits, CIDs, the layout) is readCar's.
 */
export function readCarCheckingLater(
  source: AsyncIterable<Uint8Array>,
  limits: CarReadLimits,
  uncheckedFrom: number,
): AsyncGenerator<CarItem | UncheckedCarBlock> {
  return readItems(source, limits, (cid, pieces, length, offset) =>
    cid.code === RAW_CODEC && length >= uncheckedFrom
      ? new UncheckedCarBlock(cid, pieces, length, offset)
      : checkedBlock(cid, pieces, length, offset),
  );
}

async function* readItems<Block>(
  source: AsyncIterable<Uint8Array>,
  limits: CarReadLimits,
  blockOf: BlockOf<Block>,
): AsyncGenerator<CarHeaderItem | Block> {
  const reader = new ByteReader(source);
  const maxHeader = limits.maxHeaderBytes ?? DEFAULT_MAX_HEADER;
  if (await reader.isAtEnd()) throw malformed('empty CAR');
  const headerLength = await reader.readVarint('header length');
  if (headerLength === 0 || headerLength > maxHeader) throw malformed('header length out of range');
  const header = decodeHeader(await reader.readExactly(headerLength, 'header'));
  if (header.version === 1) {
    yield { type: 'header', roots: header.roots, version: 1 };
    yield* readSections(reader, limits, undefined, blockOf);
    return;
  }
  if (limits.allowV2 !== true) throw malformed('CARv2 is not accepted here');
  const v2Header = await reader.readExactly(V2_HEADER_BYTES, 'CARv2 header');
  const dataOffset = readUint64LE(v2Header, 16);
  const dataSize = readUint64LE(v2Header, 24);
  if (dataOffset < reader.position) throw malformed('CARv2 data offset inside the header');
  await reader.skip(dataOffset - reader.position, 'CARv2 padding');
  const innerStart = reader.position;
  const innerHeaderLength = await reader.readVarint('inner header length');
  if (innerHeaderLength === 0 || innerHeaderLength > maxHeader) {
    throw malformed('inner header length out of range');
  }
  const inner = decodeHeader(await reader.readExactly(innerHeaderLength, 'inner header'));
  if (inner.version !== 1) throw malformed('CARv2 inner CAR is not CARv1');
  if (reader.position > innerStart + dataSize) throw malformed('CARv2 data size too small');
  yield { type: 'header', roots: inner.roots, version: 2 };
  yield* readSections(reader, limits, innerStart + dataSize, blockOf);
  // The index after the data is ignored (§10.1), but it must be read off the stream.
  await reader.drain();
}
