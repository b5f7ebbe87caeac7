import type { ImportCandidate } from 'ipfs-unixfs-importer';
import { describe, expect, it, vi } from 'vitest';
import { timesInTree } from '../../../main/restore/times-in-tree.ts';
import { importedTree } from '../../helpers/imported-tree.ts';

// The times a version's tree gives its entries, by path: what a backup on a computer whose file
// index does not describe the version takes for the entries a restore of it set.

describe('the times in a tree', () => {
  it('are found by path, in a sharded folder too, each folder read once while asked about', async () => {
    const time = (secs: number, nsecs: number) => ({ secs: BigInt(secs), nsecs });
    const candidates: ImportCandidate[] = [
      { path: 'root', mtime: time(1_700_000_000, 1) },
      { path: 'root/many', mtime: time(1_700_000_001, 22) },
      { path: 'root/link', link: 'many/f1', mtime: time(1_700_000_002, 333) },
    ];
    for (let index = 0; index < 60; index += 1)
      candidates.push({
        path: `root/many/f${index}`,
        content: Buffer.from(`file ${index}`),
        mtime: time(1_600_000_000 + index, 123_456_789),
      });
    // Sharded at a few entries: the folder of 60 is a HAMT with sub-shards.
    const { root, nodes } = await importedTree(candidates, {
      shardSplitThresholdBytes: 200,
      shardFanoutBits: 4,
    });
    const reads = vi.spyOn(nodes, 'get');
    const timeOf = timesInTree(root.toString(), nodes);
    expect(timeOf('')).toBe(1_700_000_000_000_000_001n);
    expect(timeOf('many')).toBe(1_700_000_001_000_000_022n);
    expect(timeOf('link')).toBe(1_700_000_002_000_000_333n);
    for (let index = 0; index < 60; index += 1)
      expect(timeOf(`many/f${index}`)).toBe(
        BigInt(1_600_000_000 + index) * 1_000_000_000n + 123_456_789n,
      );
    // Each file's node once, the folder's names once: not read again for every file.
    expect(reads.mock.calls.length).toBeLessThan(60 + 40);
    // Not in the tree, or under a file or a link: no time.
    expect(timeOf('many/f60')).toBeUndefined();
    expect(timeOf('missing/f1')).toBeUndefined();
    expect(timeOf('link/f1')).toBeUndefined();
    expect(timeOf('many/f1/deeper')).toBeUndefined();
  });
});
