import { describe, expect, it } from 'vitest';
import { openingPhase, type RestoreProgress } from '../../../main/uploader/index.ts';

describe('openingPhase', () => {
  it('tells nothing of a list read within half a second, its end included', () => {
    let now = 0;
    const told: RestoreProgress[] = [];
    const onRead = openingPhase(
      (progress) => told.push(progress),
      () => now,
    );
    for (const read of [1_000_000, 2_000_000, 3_000_000]) {
      now += 150;
      onRead(read, 3_000_000);
    }
    expect(told).toEqual([]);
  });

  it('tells a longer read from half a second on, up to its end', () => {
    let now = 0;
    const told: RestoreProgress[] = [];
    const onRead = openingPhase(
      (progress) => told.push(progress),
      () => now,
    );
    for (let piece = 1; piece <= 10; piece += 1) {
      now += 300;
      onRead(piece * 1_000_000, 10_000_000);
    }
    expect(told.length).toBeGreaterThan(1);
    expect(told.every((progress) => progress.phase === 'opening')).toBe(true);
    expect(told[0]?.bytesDone).toBe(2_000_000);
    expect(told.at(-1)).toEqual({
      phase: 'opening',
      filesDone: 0,
      filesTotal: 0,
      bytesDone: 10_000_000,
      bytesTotal: 10_000_000,
      etaSeconds: 0,
    });
  });
});
