// How many times each numbered item (a leaf, by its number in a LeafSizes) is held, so that a
// holder that turns out not to be one (a file whose read failed part way) can let go of what
// it held, and what nothing else holds can be told apart. Four bytes per item: a million
// leaves, a terabyte of data, are 4 MB.

export class UseCounts {
  private counts: Uint32Array;

  constructor(items = 1024) {
    this.counts = new Uint32Array(Math.max(items, 1));
  }

  /** One more holder of item `index`. */
  use(index: number): void {
    if (index >= this.counts.length) {
      const grown = new Uint32Array(Math.max(index + 1, this.counts.length * 2));
      grown.set(this.counts);
      this.counts = grown;
    }
    this.counts[index] = (this.counts[index] ?? 0) + 1;
  }

  /** One holder fewer of item `index`, which must have had one. */
  release(index: number): void {
    const count = this.counts[index] ?? 0;
    if (count === 0) throw new Error(`item ${index} is not held`);
    this.counts[index] = count - 1;
  }

  /** Whether anything holds item `index`. */
  isUsed(index: number): boolean {
    return (this.counts[index] ?? 0) > 0;
  }
}
