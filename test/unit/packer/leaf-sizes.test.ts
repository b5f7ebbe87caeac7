import { describe, expect, it } from 'vitest';
import { LeafMarks, LeafSizes } from '../../../main/packer/index.ts';
import { cidText, rawCidOf } from '../../../main/protocol/index.ts';

describe('LeafSizes and LeafMarks', () => {
  it('lists the known leaves a new tree no longer holds, in the order known, up to a limit', async () => {
    const cids = await Promise.all(
      Array.from({ length: 3000 }, (_, index) => rawCidOf(Buffer.from(`leaf ${index}`))),
    );
    const previous = new LeafSizes();
    cids.forEach((cid, index) => expect(previous.add(cid, index)).toBe(true));
    expect(previous.add(cids[0]!, 99)).toBe(false);
    expect(previous.sizeOf(cids[7]!)).toBe(7);
    expect(previous.sizeOfText(cidText(cids[8]!))).toBe(8);
    const marks = new LeafMarks(previous);
    // The new tree holds every third leaf again, some twice, and one leaf of its own.
    cids.forEach((cid, index) => {
      if (index % 3 === 0) expect(marks.mark(cid)).toBe(true);
    });
    expect(marks.mark(cids[3]!)).toBe(true);
    expect(marks.mark(await rawCidOf(Buffer.from('new leaf')))).toBe(false);
    const gone = cids.filter((_, index) => index % 3 !== 0).map(cidText);
    expect(marks.unmarked(10_000).map(cidText)).toEqual(gone);
    expect(marks.unmarked(5).map(cidText)).toEqual(gone.slice(0, 5));
    cids.forEach((cid) => marks.mark(cid));
    expect(marks.unmarked(10_000)).toEqual([]);
  });
});
