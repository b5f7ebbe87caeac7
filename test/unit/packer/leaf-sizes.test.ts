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
      if (index % 3 === 0) expect(marks.mark(cid)).toBe(index);
    });
    expect(marks.mark(cids[3]!)).toBe(3);
    expect(marks.mark(await rawCidOf(Buffer.from('new leaf')))).toBe(-1);
    const gone = cids.filter((_, index) => index % 3 !== 0).map(cidText);
    expect(marks.unmarked(10_000).map(cidText)).toEqual(gone);
    expect(marks.unmarked(5).map(cidText)).toEqual(gone.slice(0, 5));
    cids.forEach((cid) => marks.mark(cid));
    expect(marks.unmarked(10_000)).toEqual([]);
  });

  it('takes back one mark at a time: a leaf marked twice stays marked until both are taken back', async () => {
    const cids = await Promise.all(
      Array.from({ length: 3 }, (_, index) => rawCidOf(Buffer.from(`leaf ${index}`))),
    );
    const previous = new LeafSizes();
    for (const cid of cids) previous.add(cid, 1);
    const marks = new LeafMarks(previous);
    for (const cid of cids) marks.mark(cid);
    const twice = marks.mark(cids[1]!);
    marks.unmark(twice);
    expect(marks.unmarked(10)).toEqual([]);
    marks.unmark(twice);
    marks.unmark(marks.mark(cids[2]!));
    expect(marks.unmarked(10).map(cidText)).toEqual([cidText(cids[1]!)]);
    expect(() => marks.unmark(twice)).toThrow(/not held/);
  });

  it('numbers a leaf by addOrFind as add does, whether it was held or not', async () => {
    const [first, second] = await Promise.all([
      rawCidOf(Buffer.from('first')),
      rawCidOf(Buffer.from('second')),
    ]);
    const leaves = new LeafSizes();
    expect(leaves.addOrFind(first, 5)).toBe(0);
    // The last leaf found again is not recorded twice.
    expect(leaves.addOrFind(first, 5)).toBe(0);
    expect(leaves.addOrFind(second, 6)).toBe(1);
    expect(leaves.count).toBe(2);
    expect([...leaves].map((leaf) => leaf.size)).toEqual([5, 6]);
  });
});
