import { createHash } from 'node:crypto';
import { open, readFile, rename, rm, writeFile, type FileHandle } from 'node:fs/promises';
import { nodeIndexFileOf } from '../state/index.ts';
import { writeAllAt } from './write-all-at.ts';

// Where each dag-pb node and the manifest of a cached metadata CAR lie in it, kept in a file
// beside the CAR (`<version>.car.nodes`). Browsing a version needs a few of its nodes, but
// finding them meant reading the whole CAR first: 1.4 s for a tree of 340 000 files (a 55 MB
// CAR), each time `canopy ls` ran. With the index read instead (16 MB for that tree), a folder
// lists without the CAR being read beyond the nodes it shows.
//
// The index is only a shortcut. It is written once the CAR was read whole, every block checked
// against its CID, and names the CAR's length: one that does not read back whole, or does not
// fit the CAR beside it, is ignored (and written anew on the next full read). A version's CAR
// never changes, so an index stays true for as long as its CAR is kept; the nodes read through
// it are still checked against their CIDs one by one (CarFileNodes), so a CAR damaged on the
// disk later is noticed all the same.
//
// Layout (integers little-endian): the magic, the CAR's length (u64), the manifest's offset
// (u64) and length (u32) and SHA-256 digest (32 bytes), the node count (u32), then per node its
// digest (32 bytes), offset (u64) and length (u32), and last the SHA-256 of all that.

const MAGIC = Buffer.from('canopy-car-nodes-v1\n');
const DIGEST_BYTES = 32;
const ENTRY_BYTES = DIGEST_BYTES + 8 + 4;
const HEAD_BYTES = MAGIC.length + 8 + 8 + 4 + DIGEST_BYTES + 4;

/** A byte range of the CAR. */
export interface CarRange {
  readonly offset: number;
  readonly length: number;
}

export interface TreeNodeIndex {
  /** The CAR's length in bytes. */
  readonly carBytes: number;
  readonly manifest: CarRange & { readonly digest: Uint8Array };
  /** The nodes' SHA-256 digests, one after another. */
  readonly digests: Uint8Array;
  /** Each node's (offset, length) in the CAR, at 2n for the node numbered n. */
  readonly locations: readonly number[];
}

/** Writes the head of an index of `count` nodes into `bytes`; returns where it ends. */
function writeHead(
  bytes: Buffer,
  carBytes: number,
  manifest: TreeNodeIndex['manifest'],
  count: number,
): number {
  let at = MAGIC.copy(bytes, 0);
  at = bytes.writeBigUInt64LE(BigInt(carBytes), at);
  at = bytes.writeBigUInt64LE(BigInt(manifest.offset), at);
  at = bytes.writeUInt32LE(manifest.length, at);
  at += Buffer.from(manifest.digest).copy(bytes, at);
  return bytes.writeUInt32LE(count, at);
}

/** Writes one node's entry into `bytes` at `at`; returns where it ends. */
function writeEntry(
  bytes: Buffer,
  at: number,
  digest: Uint8Array,
  offset: number,
  length: number,
): number {
  bytes.set(digest, at);
  // The u64 as two halves: a BigInt for each of hundreds of thousands of nodes costs more.
  let after = bytes.writeUInt32LE(offset % 2 ** 32, at + DIGEST_BYTES);
  after = bytes.writeUInt32LE(Math.floor(offset / 2 ** 32), after);
  return bytes.writeUInt32LE(length, after);
}

/** Encodes `index` as the file holds it. */
export function encodeNodeIndex(index: TreeNodeIndex): Buffer {
  const count = index.digests.length / DIGEST_BYTES;
  const bytes = Buffer.alloc(HEAD_BYTES + count * ENTRY_BYTES + DIGEST_BYTES);
  let at = writeHead(bytes, index.carBytes, index.manifest, count);
  for (let node = 0; node < count; node++) {
    at = writeEntry(
      bytes,
      at,
      index.digests.subarray(node * DIGEST_BYTES, (node + 1) * DIGEST_BYTES),
      index.locations[node * 2] ?? 0,
      index.locations[node * 2 + 1] ?? 0,
    );
  }
  createHash('sha256').update(bytes.subarray(0, at)).digest().copy(bytes, at);
  return bytes;
}

/** Entries gathered before they are written. */
const ENTRIES_PER_WRITE = Math.floor((1 << 20) / ENTRY_BYTES);

/**
 * The index of a CAR being written, written beside it as it grows (`nodeIndexFileOf`): the
 * entries as the nodes are written, the head once the manifest is, then the digest of it all,
 * read back. A version's CAR made by a backup is then browsed at once without being read
 * whole: that took 1.9 s of the first `canopy ls` after a backup of 340 000 files. Calls must
 * not overlap.
 */
export class NodeIndexWriter {
  private readonly pending = Buffer.allocUnsafe(ENTRIES_PER_WRITE * ENTRY_BYTES);
  private used = 0;
  private count = 0;
  /** Where the next write goes: the head's room comes first. */
  private written = HEAD_BYTES;
  private closed = false;
  private whole = false;

  private constructor(
    readonly file: string,
    private readonly handle: FileHandle,
  ) {}

  /** Whether finish wrote the index whole. */
  get finished(): boolean {
    return this.whole;
  }

  /** Creates the index file of `carFile`, which must not exist. */
  static async create(carFile: string): Promise<NodeIndexWriter> {
    const file = nodeIndexFileOf(carFile);
    // Read as well as written: finish reads it back for its digest.
    return new NodeIndexWriter(file, await open(file, 'wx+', 0o600));
  }

  /**
   * Adds the node whose SHA-256 digest is `digest`, at `offset` in the CAR. Returns the write
   * to wait for when the entries gathered are written; undefined when they wait in memory.
   */
  add(digest: Uint8Array, offset: number, length: number): Promise<void> | undefined {
    this.used = writeEntry(this.pending, this.used, digest, offset, length);
    this.count += 1;
    return this.used === this.pending.length ? this.flush() : undefined;
  }

  /** Writes the head for a `carBytes` CAR and `manifest`, and the digest, and closes. */
  async finish(carBytes: number, manifest: TreeNodeIndex['manifest']): Promise<void> {
    try {
      await this.flush();
      const head = Buffer.alloc(HEAD_BYTES);
      writeHead(head, carBytes, manifest, this.count);
      await writeAllAt(this.handle, head, 0);
      const sum = createHash('sha256');
      const chunk = this.pending;
      for (let at = 0; at < this.written;) {
        const { bytesRead } = await this.handle.read(chunk, 0, chunk.length, at);
        if (bytesRead === 0) throw new Error(`the node index ${this.file} ends early`);
        sum.update(chunk.subarray(0, bytesRead));
        at += bytesRead;
      }
      await writeAllAt(this.handle, sum.digest(), this.written);
      this.whole = true;
    } finally {
      await this.close();
    }
  }

  /** Closes and removes the file. */
  async abandon(): Promise<void> {
    await this.close();
    await rm(this.file, { force: true });
  }

  private async flush(): Promise<void> {
    await writeAllAt(this.handle, this.pending.subarray(0, this.used), this.written);
    this.written += this.used;
    this.used = 0;
  }

  private async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close();
  }
}

/** The index in `bytes`, or undefined when they are not a whole index of a `carBytes` CAR. */
export function decodeNodeIndex(bytes: Buffer, carBytes: number): TreeNodeIndex | undefined {
  if (bytes.length < HEAD_BYTES + DIGEST_BYTES) return undefined;
  if (!bytes.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  const body = bytes.subarray(0, bytes.length - DIGEST_BYTES);
  const sum = createHash('sha256').update(body).digest();
  if (!sum.equals(bytes.subarray(body.length))) return undefined;
  let at = MAGIC.length;
  if (Number(bytes.readBigUInt64LE(at)) !== carBytes) return undefined;
  at += 8;
  const manifestOffset = Number(bytes.readBigUInt64LE(at));
  const manifestLength = bytes.readUInt32LE(at + 8);
  const manifestDigest = bytes.subarray(at + 12, at + 12 + DIGEST_BYTES);
  at += 12 + DIGEST_BYTES;
  const count = bytes.readUInt32LE(at);
  at += 4;
  if (body.length !== HEAD_BYTES + count * ENTRY_BYTES) return undefined;
  const digests = new Uint8Array(count * DIGEST_BYTES);
  const locations = new Array<number>(count * 2);
  for (let node = 0; node < count; node++) {
    digests.set(bytes.subarray(at, at + DIGEST_BYTES), node * DIGEST_BYTES);
    at += DIGEST_BYTES;
    locations[node * 2] = Number(bytes.readBigUInt64LE(at));
    locations[node * 2 + 1] = bytes.readUInt32LE(at + 8);
    at += 12;
  }
  return {
    carBytes,
    manifest: { offset: manifestOffset, length: manifestLength, digest: manifestDigest },
    digests,
    locations,
  };
}

/** The index kept beside `carFile`, if it is there, whole, and fits a `carBytes` CAR. */
export async function readNodeIndex(
  carFile: string,
  carBytes: number,
): Promise<TreeNodeIndex | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(nodeIndexFileOf(carFile));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  return decodeNodeIndex(bytes, carBytes);
}

/**
 * Keeps `index` beside `carFile`, written whole under another name first, so that a crash or a
 * full disk leaves either no index or a whole one.
 */
export async function writeNodeIndex(carFile: string, index: TreeNodeIndex): Promise<void> {
  const file = nodeIndexFileOf(carFile);
  const partial = `${file}.partial`;
  try {
    await writeFile(partial, encodeNodeIndex(index), { mode: 0o600 });
    await rename(partial, file);
  } catch (error) {
    await rm(partial, { force: true });
    throw error;
  }
}
