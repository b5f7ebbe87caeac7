import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import {
  GarbageAtPhaseSwitch,
  WORTH_COLLECTING_BYTES,
} from '../../../main/uploader/garbage-at-phase-switch.ts';

const MB = 1024 * 1024;

/** Arrays of 8 MB each (160 MB unless told), dead as soon as this returns. */
function makeGarbage(arrays = 20): number {
  let kept = 0;
  for (let index = 0; index < arrays; index += 1) {
    const array = new Array<number>(MB).fill(index + 0.5);
    kept += array.length;
  }
  return kept;
}

describe('GarbageAtPhaseSwitch', () => {
  it('frees what is dead at once, before the upload and during it, and can be ended any number of times', () => {
    const garbage = new GarbageAtPhaseSwitch();
    try {
      garbage.collect();
      const before = v8.getHeapStatistics().used_heap_size;
      expect(makeGarbage()).toBe(20 * MB);
      const withGarbage = v8.getHeapStatistics().used_heap_size;
      garbage.collectForUpload();
      const after = v8.getHeapStatistics().used_heap_size;
      // Large arrays live outside the young generation: only a full collection frees them.
      expect(withGarbage - before).toBeGreaterThan(60 * MB);
      expect(after - before).toBeLessThan(10 * MB);
      // Collected again, with the heap sized for the upload already.
      expect(makeGarbage()).toBe(20 * MB);
      expect(v8.getHeapStatistics().used_heap_size - after).toBeGreaterThan(60 * MB);
      garbage.collect();
      expect(v8.getHeapStatistics().used_heap_size - after).toBeLessThan(10 * MB);
    } finally {
      garbage.end();
      garbage.end();
    }
  });

  it('leaves the little garbage of a small backup to V8, without a collection', () => {
    const used = (): number => v8.getHeapStatistics().used_heap_size;
    const garbage = new GarbageAtPhaseSwitch();
    try {
      const before = used();
      expect(makeGarbage(1)).toBe(MB);
      const withGarbage = used();
      // One 8 MB array, in the large-object space: a collection would free it.
      expect(withGarbage - before).toBeGreaterThan(6 * MB);
      expect(withGarbage - before).toBeLessThan(WORTH_COLLECTING_BYTES);
      garbage.collect();
      garbage.collectForUpload();
      expect(used()).toBeGreaterThanOrEqual(withGarbage);
    } finally {
      garbage.end();
    }
  });

  it('once it collected before the push, collects for the upload however little came since', () => {
    const used = (): number => v8.getHeapStatistics().used_heap_size;
    const garbage = new GarbageAtPhaseSwitch();
    try {
      expect(makeGarbage()).toBe(20 * MB);
      garbage.collect();
      const collected = used();
      expect(makeGarbage(1)).toBe(MB);
      expect(used() - collected).toBeGreaterThan(6 * MB);
      // That collection sized the heap tightly; this one sizes it for the upload.
      garbage.collectForUpload();
      expect(used() - collected).toBeLessThan(2 * MB);
    } finally {
      garbage.end();
    }
  });
});
