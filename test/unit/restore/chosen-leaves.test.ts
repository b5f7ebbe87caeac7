import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { LeafSizes } from '../../../main/packer/index.ts';
import { rawCidOf } from '../../../main/protocol/index.ts';
import { chosenLeaves } from '../../../main/restore/verify-version.ts';

// The leaves a verify of a sample fetches: random, each once, and within a byte budget when it
// has one (a backup's check of a few blocks, over a link that may be slow).

const MiB = 1 << 20;

/** A tree of `count` leaves of `size` bytes each (their CIDs of random bytes). */
async function treeOf(count: number, size: number) {
  const leaves = new LeafSizes();
  for (let i = 0; i < count; i += 1) leaves.add(await rawCidOf(randomBytes(32)), size);
  return { manifest: {}, leaves };
}

describe('chosenLeaves', () => {
  it('picks as many distinct leaves as asked while they fit the byte budget', async () => {
    const large = [...chosenLeaves(await treeOf(20, MiB), 8, 4 * MiB)];
    expect(large).toHaveLength(4);
    expect(new Set(large.map((leaf) => leaf.cid.toString())).size).toBe(4);
    const small = [...chosenLeaves(await treeOf(20, 1024), 8, 4 * MiB)];
    expect(small).toHaveLength(8);
    expect(new Set(small.map((leaf) => leaf.cid.toString())).size).toBe(8);
  });

  it('takes one leaf larger than the budget, and every leaf of a tree smaller than the sample', async () => {
    expect([...chosenLeaves(await treeOf(3, 8 * MiB), 8, 4 * MiB)]).toHaveLength(1);
    expect([...chosenLeaves(await treeOf(3, 1024), 8, 4 * MiB)]).toHaveLength(3);
    expect([...chosenLeaves(await treeOf(5, MiB), 'all', 4 * MiB)]).toHaveLength(5);
  });
});
