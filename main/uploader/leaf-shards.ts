// Which shard each new leaf of a backup was laid out in, by the leaf's number among the packed
// tree's leaves (LeafSizes). With the host's answer to blocks/missing it tells which shards
// must be sent. Each shard kept the CID text of its blocks for that before: about 110 bytes of
// heap per leaf until the upload was queued, against 4 here.

const NO_SHARD = -1;

export class LeafShards {
  private shards = new Int32Array(1024).fill(NO_SHARD);

  /** Leaf `leaf` is laid out in shard `shard`; a leaf laid out twice keeps its first shard. */
  record(leaf: number, shard: number): void {
    if (!Number.isInteger(leaf) || leaf < 0) throw new Error(`not a leaf number: ${leaf}`);
    if (leaf >= this.shards.length) {
      const grown = new Int32Array(Math.max(leaf + 1, this.shards.length * 2)).fill(NO_SHARD);
      grown.set(this.shards);
      this.shards = grown;
    }
    if (this.shards[leaf] === NO_SHARD) this.shards[leaf] = shard;
  }

  /** Leaf `leaf` is in no shard after all: taken out of the one it was laid out in. */
  forget(leaf: number): void {
    if (leaf >= 0 && leaf < this.shards.length) this.shards[leaf] = NO_SHARD;
  }

  /** The shard leaf `leaf` was laid out in; undefined when it is in none. */
  shardOf(leaf: number): number | undefined {
    const shard = leaf >= 0 ? this.shards[leaf] : undefined;
    return shard === undefined || shard === NO_SHARD ? undefined : shard;
  }
}
