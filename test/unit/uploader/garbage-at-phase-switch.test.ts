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
  it('frees what is dead at once, and can be collected again and ended any number of times', () => {
    const garbage = new GarbageAtPhaseSwitch();
    try {
      garbage.collect();
      const before = v8.getHeapStatistics().used_heap_size;
      expect(makeGarbage()).toBe(20 * MB);
      const withGarbage = v8.getHeapStatistics().used_heap_size;
      garbage.collect();
      const after = v8.getHeapStatistics().used_heap_size;
      // Large arrays live outside the young generation: only a full collection frees them.
      expect(withGarbage - before).toBeGreaterThan(60 * MB);
      expect(after - before).toBeLessThan(10 * MB);
    } finally {
      garbage.end();
      garbage.end();
    }
  });
});
