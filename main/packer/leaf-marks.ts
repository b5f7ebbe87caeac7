import type { CID } from 'multiformats/cid';
import type { LeafSizes } from './leaf-sizes.ts';

// The leaves of the version a backup builds on, each marked once the new tree holds it again.
// The new tree records only the leaves new to it, so a backup of an unchanged tree holds its
// leaves once (the version's), not twice: 20 MB on 400 000 files. What stays unmarked is what
// the new version no longer references (§17.4's deleted_block_cids).

export class LeafMarks {
  /** One bit per known leaf, by its number in `known`. */
  private readonly marks: Uint8Array;

  constructor(private readonly known: LeafSizes) {
    this.marks = new Uint8Array(Math.ceil(known.count / 8));
  }

  /** Marks `cid` when it is a known leaf; false, and nothing marked, when it is not. */
  mark(cid: CID): boolean {
    return this.markAt(this.known.indexOf(cid));
  }

  /** mark, for a leaf given by its SHA-256 digest. */
  markDigest(digest: Uint8Array): boolean {
    return this.markAt(this.known.indexOfDigest(digest));
  }

  private markAt(index: number): boolean {
    if (index < 0) return false;
    this.marks[index >> 3] = (this.marks[index >> 3] ?? 0) | (1 << (index & 7));
    return true;
  }

  /** The known leaves never marked, at most `limit` of them, in the order they were known. */
  unmarked(limit: number): CID[] {
    const found: CID[] = [];
    for (let index = 0; index < this.known.count && found.length < limit; index++) {
      if (((this.marks[index >> 3] ?? 0) & (1 << (index & 7))) === 0)
        found.push(this.known.cidAt(index));
    }
    return found;
  }
}
