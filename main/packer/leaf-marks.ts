import type { CID } from 'multiformats/cid';
import type { LeafSizes } from './leaf-sizes.ts';
import { UseCounts } from './use-counts.ts';

// The leaves of the version a backup builds on, each marked once the new tree holds it again.
// The new tree records only the leaves new to it, so a backup of an unchanged tree holds its
// leaves once (the version's), not twice: 20 MB on 400 000 files. What stays unmarked is what
// the new version no longer references (§17.4's deleted_block_cids). Marks are counted: a file
// whose read fails part way is left out of the tree, and takes back the marks it made.

export class LeafMarks {
  /** How many times each known leaf was marked, by its number in `known`. */
  private readonly marks: UseCounts;

  constructor(private readonly known: LeafSizes) {
    this.marks = new UseCounts(known.count);
  }

  /** Marks `cid` when it is a known leaf: its number among them; -1, nothing marked, if not. */
  mark(cid: CID): number {
    return this.markAt(this.known.indexOf(cid));
  }

  /** mark, for a leaf given by its SHA-256 digest; false when it is not a known leaf. */
  markDigest(digest: Uint8Array): boolean {
    return this.markAt(this.known.indexOfDigest(digest)) >= 0;
  }

  /**
   * Takes back one mark of the known leaf numbered `index` (as mark returned it): its holder
   * is not in the tree after all. Marked by nothing else, it is unmarked again.
   */
  unmark(index: number): void {
    this.marks.release(index);
  }

  private markAt(index: number): number {
    if (index >= 0) this.marks.use(index);
    return index;
  }

  /** The known leaves never marked, at most `limit` of them, in the order they were known. */
  unmarked(limit: number): CID[] {
    const found: CID[] = [];
    for (let index = 0; index < this.known.count && found.length < limit; index++) {
      if (!this.marks.isUsed(index)) found.push(this.known.cidAt(index));
    }
    return found;
  }
}
