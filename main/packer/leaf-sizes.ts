import type { CID } from 'multiformats/cid';
import { CidTable, RAW_CODEC } from '../protocol/index.ts';

// The distinct raw leaves of a tree with their sizes: what a packed tree holds, what the
// version a backup builds on already stores, what a restore fetches. As compact as CidTable
// (a leaf is at most 1 MiB, so its size is a small integer in a packed array).

export class LeafSizes {
  private readonly cids = new CidTable(RAW_CODEC);
  private readonly sizes: number[] = [];

  /** How many distinct leaves are held. */
  get count(): number {
    return this.cids.size;
  }

  /** Records a leaf; false, and nothing changed, when it was held already. */
  add(cid: CID, size: number): boolean {
    return this.recorded(this.cids.size, this.cids.add(cid), size);
  }

  /** The leaf's number, recording it first when it was not held. */
  addOrFind(cid: CID, size: number): number {
    const before = this.cids.size;
    const index = this.cids.add(cid);
    this.recorded(before, index, size);
    return index;
  }

  /** add, for a leaf given by its SHA-256 digest (copied in). */
  addDigest(digest: Uint8Array, size: number): boolean {
    return this.recorded(this.cids.size, this.cids.addDigest(digest), size);
  }

  /** Keeps the size of the leaf numbered `index`, when it is new (numbered `before`). */
  private recorded(before: number, index: number, size: number): boolean {
    if (index !== before) return false;
    this.sizes.push(size);
    return true;
  }

  has(cid: CID): boolean {
    return this.cids.indexOf(cid) >= 0;
  }

  /** The number of `cid`, in the order leaves were added; -1 when it is not held. */
  indexOf(cid: CID): number {
    return this.cids.indexOf(cid);
  }

  /** indexOf, for a leaf given by its SHA-256 digest. */
  indexOfDigest(digest: Uint8Array): number {
    return this.cids.indexOfDigest(digest);
  }

  /** indexOf, for a CID's text. */
  indexOfText(text: string): number {
    return this.cids.indexOfText(text);
  }

  /** The leaf numbered `index`, its CID made anew. */
  cidAt(index: number): CID {
    return this.cids.cidAt(index);
  }

  /** The size of the leaf `cid`, undefined when it is not held. */
  sizeOf(cid: CID): number | undefined {
    return this.sizes[this.cids.indexOf(cid)];
  }

  /** The size of the leaf numbered `index`; undefined when there is no such leaf. */
  sizeAt(index: number): number | undefined {
    return this.sizes[index];
  }

  /** sizeOf, for a CID's text. */
  sizeOfText(text: string): number | undefined {
    return this.sizes[this.cids.indexOfText(text)];
  }

  /** Every leaf, in the order it was first added, its CID made as it is read. */
  *[Symbol.iterator](): Generator<{ cid: CID; size: number }> {
    for (let index = 0; index < this.cids.size; index++)
      yield { cid: this.cids.cidAt(index), size: this.sizes[index] ?? 0 };
  }
}
