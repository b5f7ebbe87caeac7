import { describe, expect, it } from 'vitest';
import { LeafSizes } from '../../../main/packer/index.ts';
import { cidText, rawCidOf } from '../../../main/protocol/index.ts';

describe('LeafSizes', () => {
  it('lists the leaves another set lacks, in the order added, up to a limit', async () => {
    const cids = await Promise.all(
      Array.from({ length: 3000 }, (_, index) => rawCidOf(Buffer.from(`leaf ${index}`))),
    );
    const previous = new LeafSizes();
    const current = new LeafSizes();
    cids.forEach((cid, index) => {
      expect(previous.add(cid, index)).toBe(true);
      // The current tree keeps every third leaf.
      if (index % 3 === 0) current.add(cid, index);
    });
    expect(previous.add(cids[0]!, 99)).toBe(false);
    expect(previous.sizeOf(cids[7]!)).toBe(7);
    expect(previous.sizeOfText(cidText(cids[8]!))).toBe(8);
    const gone = cids.filter((_, index) => index % 3 !== 0).map(cidText);
    expect(previous.missingFrom(current, 10_000).map(cidText)).toEqual(gone);
    expect(previous.missingFrom(current, 5).map(cidText)).toEqual(gone.slice(0, 5));
    expect(current.missingFrom(previous, 10_000)).toEqual([]);
  });
});
