import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import { GarbageAtPhaseSwitch } from '../../../main/uploader/garbage-at-phase-switch.ts';

const MB = 1024 * 1024;

/** About 80 MB of arrays that are dead as soon as this returns. */
function makeGarbage(): number {
  let kept = 0;
  for (let index = 0; index < 20; index += 1) {
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
});
