import type { CID } from 'multiformats/cid';
import { cidBytesOfText, cidFromSha256, SHA2_256_CODE } from './cid.ts';

// A set of CIDs of one codec, each numbered in the order it was added, held in two typed arrays:
// the 32-byte digests one after another, and an open-addressing hash table of their numbers.
// A tree of 100 000 files has 100 000 leaves and as many File nodes; kept as CID text in a Map,
// each cost about 110 bytes of heap in small objects the collector traces again and again, and
// a backup holds several such sets at once. Here an entry costs 40 bytes, none of them traced.
// SHA-256 digests are uniform, so their first four bytes serve as the hash.

const DIGEST_BYTES = 32;
const INITIAL_CAPACITY = 1024;

function hashOf(digest: Uint8Array): number {
  return (
    (digest[0] ?? 0) | ((digest[1] ?? 0) << 8) | ((digest[2] ?? 0) << 16) | ((digest[3] ?? 0) << 24)
  );
}

export class CidTable {
  private digests: Uint8Array;
  /** Entry number + 1 per slot, 0 when empty; twice the capacity, so at most half full. */
  private slots: Int32Array;
  private count = 0;

  /**
   * Every CID of the table has this codec (§3: raw, dag-pb or dag-cbor). `expected`, when
   * known, is how many it will hold: room for them is made at once, not by growing.
   */
  constructor(
    readonly codec: number,
    expected = 0,
  ) {
    let capacity = INITIAL_CAPACITY;
    while (capacity < expected) capacity *= 2;
    this.digests = new Uint8Array(capacity * DIGEST_BYTES);
    this.slots = new Int32Array(capacity * 2);
  }

  get size(): number {
    return this.count;
  }

  /** The number of `cid` in this table, or -1 when it is not in it. */
  indexOf(cid: CID): number {
    if (!this.fits(cid)) return -1;
    return this.find(cid.multihash.digest);
  }

  /** indexOf for a CID's text (§3); -1 for text that is not a CID of this table's codec. */
  indexOfText(text: string): number {
    const bytes = cidBytesOfText(text);
    if (bytes?.[1] !== this.codec) return -1;
    return this.find(bytes.subarray(bytes.length - DIGEST_BYTES));
  }

  /** indexOf, for a CID of this table's codec given by its SHA-256 digest. */
  indexOfDigest(digest: Uint8Array): number {
    return digest.length === DIGEST_BYTES ? this.find(digest) : -1;
  }

  has(cid: CID): boolean {
    return this.indexOf(cid) >= 0;
  }

  /** The number of `cid`, which is added first when it is not in the table yet. */
  add(cid: CID): number {
    if (!this.fits(cid)) throw new Error(`a table of codec ${this.codec} cannot hold ${cid.code}`);
    return this.addDigest(cid.multihash.digest);
  }

  /** add, for a CID of this table's codec given by its SHA-256 digest (copied in). */
  addDigest(digest: Uint8Array): number {
    if (digest.length !== DIGEST_BYTES) throw new Error('a SHA-256 digest has 32 bytes');
    const found = this.find(digest);
    if (found >= 0) return found;
    if (this.count * DIGEST_BYTES === this.digests.length) this.grow();
    const index = this.count;
    this.digests.set(digest, index * DIGEST_BYTES);
    this.count += 1;
    this.place(index);
    return index;
  }

  /** The digest numbered `index`: a view, valid until the table grows. */
  digestAt(index: number): Uint8Array {
    if (index < 0 || index >= this.count) throw new RangeError(`no entry ${index}`);
    return this.digests.subarray(index * DIGEST_BYTES, (index + 1) * DIGEST_BYTES);
  }

  /** Every digest, in the order they were added, one after another: a view, as digestAt. */
  allDigests(): Uint8Array {
    return this.digests.subarray(0, this.count * DIGEST_BYTES);
  }

  /** The CID numbered `index`, made anew. */
  cidAt(index: number): CID {
    if (index < 0 || index >= this.count) throw new RangeError(`no entry ${index}`);
    const start = index * DIGEST_BYTES;
    return cidFromSha256(this.codec, this.digests.slice(start, start + DIGEST_BYTES));
  }

  private fits(cid: CID): boolean {
    return (
      cid.code === this.codec &&
      cid.multihash.code === SHA2_256_CODE &&
      cid.multihash.digest.length === DIGEST_BYTES
    );
  }

  private find(digest: Uint8Array): number {
    const mask = this.slots.length - 1;
    for (let slot = hashOf(digest) & mask; ; slot = (slot + 1) & mask) {
      const entry = this.slots[slot] ?? 0;
      if (entry === 0) return -1;
      if (this.holdsAt(entry - 1, digest)) return entry - 1;
    }
  }

  private holdsAt(index: number, digest: Uint8Array): boolean {
    const start = index * DIGEST_BYTES;
    for (let offset = 0; offset < DIGEST_BYTES; offset++) {
      if (this.digests[start + offset] !== digest[offset]) return false;
    }
    return true;
  }

  private place(index: number): void {
    const start = index * DIGEST_BYTES;
    const digest = this.digests.subarray(start, start + DIGEST_BYTES);
    const mask = this.slots.length - 1;
    let slot = hashOf(digest) & mask;
    while ((this.slots[slot] ?? 0) !== 0) slot = (slot + 1) & mask;
    this.slots[slot] = index + 1;
  }

  private grow(): void {
    const digests = new Uint8Array(this.digests.length * 2);
    digests.set(this.digests);
    this.digests = digests;
    this.slots = new Int32Array(this.slots.length * 2);
    for (let index = 0; index < this.count; index++) this.place(index);
  }
}
