import { describe, expect, it } from 'vitest';
import { WorkMeter } from '../../../main/uploader/index.ts';

/**
 * A phase done on a clock: each file costs `fileMs`, each MiB `mibMs`; a file's bytes are done
 * a MiB at a time. Returns, after each file, the meter's ETA and the true time left.
 */
function simulate(
  sizes: readonly number[],
  fileMs: number,
  mibMs: number,
): { eta: number | null; left: number; filesDone: number }[] {
  const MiB = 1024 * 1024;
  const totalBytes = sizes.reduce((sum, size) => sum + size, 0);
  let now = 0;
  const meter = new WorkMeter(() => now, sizes.length, totalBytes);
  let files = 0;
  let bytes = 0;
  meter.sample(0, 0);
  const timeline: { at: number; eta: number | null; filesDone: number }[] = [];
  for (const size of sizes) {
    for (let done = 0; done < size; done += MiB) {
      const piece = Math.min(MiB, size - done);
      now += (piece / MiB) * mibMs;
      bytes += piece;
      meter.sample(files, bytes);
    }
    now += fileMs;
    files += 1;
    meter.sample(files, bytes);
    timeline.push({
      at: now,
      eta: meter.etaSeconds(sizes.length - files, totalBytes - bytes),
      filesDone: files,
    });
  }
  return timeline.map(({ at, eta, filesDone }) => ({ eta, left: (now - at) / 1000, filesDone }));
}

describe('WorkMeter', () => {
  it('has no ETA before it has measured a stretch, and 0 when nothing remains', () => {
    let now = 0;
    const meter = new WorkMeter(() => now, 10, 100);
    expect(meter.etaSeconds(10, 100)).toBeNull();
    meter.sample(0, 0);
    now = 100; // closer than a sample interval: merged
    meter.sample(0, 50);
    expect(meter.etaSeconds(10, 50)).toBeNull();
    expect(meter.etaSeconds(0, 0)).toBe(0);
  });

  it('does not count the wait before the first byte as slowness', () => {
    // A phase starts; the host takes 3 s before the first shard moves, and its first 59 bytes
    // (a CAR header) go at once; then 1 MB a second of the 37 MB.
    let now = 0;
    const meter = new WorkMeter(() => now, 0, 37_000_000);
    meter.sample(0, 0);
    now = 3000;
    meter.sample(0, 59);
    expect(meter.etaSeconds(0, 37_000_000 - 59)).toBeNull();
    for (let second = 1; second <= 5; second += 1) {
      now = 3000 + second * 1000;
      meter.sample(0, 59 + second * 1_000_000);
    }
    expect(meter.etaSeconds(0, 32_000_000)).toBeCloseTo(32);
  });

  it('gives the exact ETA at a steady rate', () => {
    let now = 0;
    const meter = new WorkMeter(() => now, 0, 40_000_000);
    for (let second = 0; second <= 10; second += 1) {
      now = second * 1000;
      meter.sample(0, second * 1_000_000); // 1 MB/s
    }
    expect(meter.etaSeconds(0, 30_000_000)).toBeCloseTo(30);
  });

  it('moves towards a new rate gradually, not at once', () => {
    let now = 0;
    let done = 0;
    const meter = new WorkMeter(() => now, 0, 1_000_000, 5000);
    const run = (seconds: number, perSecond: number): void => {
      for (let step = 0; step < seconds; step += 1) {
        now += 1000;
        done += perSecond;
        meter.sample(0, done);
      }
    };
    meter.sample(0, 0);
    run(20, 1000);
    run(1, 10_000); // one fast second
    const afterSpike = meter.etaSeconds(0, 10_000) ?? 0;
    expect(afterSpike).toBeLessThan(10);
    expect(afterSpike).toBeGreaterThan(3);
    run(60, 10_000); // a lasting change is followed
    expect(meter.etaSeconds(0, 10_000)).toBeCloseTo(1, 1);
  });

  it('counts a wait with nothing moving as slowness once things move again', () => {
    let now = 0;
    const meter = new WorkMeter(() => now, 0, 100_000_000, 5000);
    let done = 0;
    meter.sample(0, 0);
    for (let second = 1; second <= 10; second += 1) {
      now = second * 1000;
      done += 1_000_000;
      meter.sample(0, done);
    }
    expect(meter.etaSeconds(0, 10_000_000)).toBeCloseTo(10);
    // The host stalls for 9 s (samples with nothing new), then 1 MB more arrives.
    for (let second = 11; second <= 19; second += 1) {
      now = second * 1000;
      meter.sample(0, done);
    }
    now = 20_000;
    done += 1_000_000;
    meter.sample(0, done);
    expect(meter.etaSeconds(0, 10_000_000)).toBeGreaterThan(20);
  });

  it('takes the time of bytes taken back as spent on those done again', () => {
    let now = 0;
    const meter = new WorkMeter(() => now, 0, 10_000_000);
    meter.sample(0, 0);
    now = 1000;
    meter.sample(0, 1_000_000);
    now = 2000;
    meter.sample(0, 2_000_000);
    // The second MB failed half a second later: taken back, then written again by 3 s. The
    // half second went on it too: 1 MB a second, not 2.
    now = 2500;
    meter.sample(0, 1_000_000);
    now = 3000;
    meter.sample(0, 2_000_000);
    expect(meter.etaSeconds(0, 8_000_000)).toBeCloseTo(8);
  });

  it('says what the small files left take, after the large files came first', () => {
    // Five files of 100 MiB (20 ms a MiB), then 50 000 of 1 KiB (0.2 ms each): the restore that
    // said "almost done" for the 10 s its small files took.
    const sizes = [...Array(5).fill(100 * 1024 * 1024), ...Array(50_000).fill(1024)];
    const timeline = simulate(sizes, 0.2, 20);
    for (const filesDone of [10_000, 25_000, 40_000]) {
      const point = timeline[filesDone - 1]!;
      expect(point.eta).not.toBeNull();
      expect(point.eta!).toBeGreaterThan(point.left * 0.75);
      expect(point.eta!).toBeLessThan(point.left * 1.25);
    }
  });

  it('does not take the rate of small files for that of the large ones after them', () => {
    const sizes = [...Array(50_000).fill(1024), ...Array(5).fill(100 * 1024 * 1024)];
    const timeline = simulate(sizes, 0.2, 20);
    // Half way through the small files: 5 s of them and 10 s of large files are left. A rate of
    // bytes taken on small files alone says about 1 800 s.
    const point = timeline[25_000 - 1]!;
    expect(point.eta).not.toBeNull();
    expect(point.eta!).toBeLessThan(point.left * 2);
    expect(point.eta!).toBeGreaterThan(point.left * 0.5);
  });

  it('goes by the bytes alone until a file ends, and then by what it found a file costs', () => {
    // Three files of 4 GiB, 5 ms a MiB: a file's count moves only at its end.
    const large = 4096 * 1024 * 1024;
    let now = 0;
    const meter = new WorkMeter(() => now, 3, 3 * large);
    meter.sample(0, 0);
    for (let mib = 1; mib <= 2048; mib += 1) {
      now += 5;
      meter.sample(0, mib * 1024 * 1024);
    }
    // Half the first in 10.24 s: five halves left, not the files' count taken for as much again.
    expect(meter.etaSeconds(3, 2.5 * large)).toBeCloseTo(5 * 10.24, 1);
    // Once the first has ended, with what a file costs beside its bytes (0.5 ms).
    const afterFirst = simulate(Array(3).fill(large), 0.5, 5)[0]!;
    expect(afterFirst.eta!).toBeGreaterThan(afterFirst.left * 0.9);
    expect(afterFirst.eta!).toBeLessThan(afterFirst.left * 1.1);
  });

  it('has no ETA while only files move and bytes are left, whose cost is not known yet', () => {
    // A backup walking unchanged files, none read yet, with a changed file of 1 GB to read.
    let now = 0;
    const meter = new WorkMeter(() => now, 10_000, 1_000_000_000);
    meter.sample(0, 0);
    for (let step = 1; step <= 10; step += 1) {
      now += 500;
      meter.sample(step * 500, 0);
    }
    expect(meter.etaSeconds(5_000, 1_000_000_000)).toBeNull();
    // With no bytes to read, the files left take what those walked took.
    expect(meter.etaSeconds(5_000, 0)).toBeCloseTo(5);
  });

  it('says what its share left takes, when its files are of one size all along', () => {
    const sizes = Array(2_000).fill(512 * 1024);
    const timeline = simulate(sizes, 1, 10);
    for (const filesDone of [500, 1_000, 1_500]) {
      const point = timeline[filesDone - 1]!;
      expect(point.eta!).toBeCloseTo(point.left, 0);
    }
  });
});
