import { describe, expect, it } from 'vitest';
import { RateMeter } from '../../../main/uploader/index.ts';

describe('RateMeter', () => {
  it('has no ETA before it has seen a rate, and 0 when nothing remains', () => {
    let now = 0;
    const meter = new RateMeter(() => now);
    expect(meter.etaSeconds(100)).toBeNull();
    meter.sample(0);
    now = 100; // closer than a sample interval: merged
    meter.sample(50);
    expect(meter.etaSeconds(100)).toBeNull();
    expect(meter.etaSeconds(0)).toBe(0);
  });

  it('does not count the wait before the first byte as slowness', () => {
    // A phase starts; the host takes 3 s before the first shard moves, and its first 59 bytes
    // (a CAR header) go at once; then 1 MB a second of the 37 MB.
    let now = 0;
    const meter = new RateMeter(() => now);
    meter.sample(0);
    now = 3000;
    meter.sample(59);
    expect(meter.etaSeconds(37_000_000 - 59)).toBeNull();
    for (let second = 1; second <= 5; second += 1) {
      now = 3000 + second * 1000;
      meter.sample(59 + second * 1_000_000);
    }
    expect(meter.etaSeconds(32_000_000)).toBeCloseTo(32);
  });

  it('gives the exact ETA at a steady rate', () => {
    let now = 0;
    const meter = new RateMeter(() => now);
    for (let second = 0; second <= 10; second += 1) {
      now = second * 1000;
      meter.sample(second * 1_000_000); // 1 MB/s
    }
    expect(meter.perSecond).toBeCloseTo(1_000_000);
    expect(meter.etaSeconds(30_000_000)).toBeCloseTo(30);
  });

  it('moves towards a new rate gradually, not at once', () => {
    let now = 0;
    let done = 0;
    const meter = new RateMeter(() => now, 5000);
    const run = (seconds: number, perSecond: number): void => {
      for (let step = 0; step < seconds; step += 1) {
        now += 1000;
        done += perSecond;
        meter.sample(done);
      }
    };
    meter.sample(0);
    run(20, 1000);
    run(1, 10_000); // one fast second
    const afterSpike = meter.perSecond ?? 0;
    expect(afterSpike).toBeGreaterThan(1000);
    expect(afterSpike).toBeLessThan(3000);
    run(60, 10_000); // a lasting change is followed
    expect(meter.perSecond).toBeCloseTo(10_000, -2);
  });
});
