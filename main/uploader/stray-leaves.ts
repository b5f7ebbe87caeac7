import { cidText } from '../protocol/index.ts';
import type { LeafSizes } from '../packer/index.ts';
import type { ShardPlanner } from './shard-planner.ts';
import type { ShardWriter } from './shard-writer.ts';

// A file whose read failed part way (a damaged sector) is not in the version, but the leaves
// read before the failure were laid out in shards already (PackedTree.strayLeaves). Sent, they
// would join the version's block set (§11.6) as blocks no file of it holds, and stay in every
// later version's, since a version deletes only the leaves its previous tree held: a 7 MiB
// file failing at its fourth chunk left 3 MiB on the service for good, and the backup told of
// 3 MiB of new bytes for a version holding none of them. Here they leave the shards before
// anything is asked or sent: each shard holding one is made again without it.

export async function dropStrayLeaves(
  shards: ShardPlanner | ShardWriter,
  strays: readonly number[],
  leaves: LeafSizes,
  /** The folder planned shards read their blocks from. */
  sourceDir: string,
): Promise<void> {
  const byShard = new Map<number, Set<string>>();
  for (const leaf of strays) {
    const shard = shards.leafShards.shardOf(leaf);
    if (shard === undefined) continue;
    shards.leafShards.forget(leaf);
    const cids = byShard.get(shard) ?? new Set<string>();
    cids.add(cidText(leaves.cidAt(leaf)));
    byShard.set(shard, cids);
  }
  for (const [shard, cids] of byShard) await shards.dropBlocks(shard, cids, sourceDir);
}
