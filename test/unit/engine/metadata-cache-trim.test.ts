import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { trimMetadataCache } from '../../../main/engine/metadata-cache-trim.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A cache of CARs of 100 bytes, `a` used longest ago, then `b`, and so on. */
function cacheOf(names: readonly string[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-cache-trim-'));
  dirs.push(dir);
  for (const [index, name] of names.entries()) {
    const file = path.join(dir, `${name}.car`);
    writeFileSync(file, Buffer.alloc(100));
    const used = new Date(Date.UTC(2026, 0, 1, 0, index));
    utimesSync(file, used, used);
  }
  // Not a cached CAR: never counted, never removed.
  writeFileSync(path.join(dir, 'notes.txt'), Buffer.alloc(10_000));
  return dir;
}

describe('trimMetadataCache', () => {
  it('removes the CARs used longest ago until the rest fits, keeping the kept ones', async () => {
    const dir = cacheOf(['a', 'b', 'c', 'd', 'e']);
    await trimMetadataCache(dir, new Set(['a']), 300);
    // `a` is kept though used first; `b` and `c` go, and the three left fit 300 bytes.
    expect(readdirSync(dir).sort()).toEqual(['a.car', 'd.car', 'e.car', 'notes.txt']);
  });

  it('leaves a cache within its budget as it is, and keeps kept ones past it', async () => {
    const within = cacheOf(['a', 'b']);
    await trimMetadataCache(within, new Set(), 200);
    expect(readdirSync(within).sort()).toEqual(['a.car', 'b.car', 'notes.txt']);
    const kept = cacheOf(['a', 'b', 'c']);
    await trimMetadataCache(kept, new Set(['b', 'c']), 1);
    expect(readdirSync(kept).sort()).toEqual(['b.car', 'c.car', 'notes.txt']);
  });

  it('counts and removes each CAR with the index of its nodes, and drops an index left alone', async () => {
    const dir = cacheOf(['a', 'b', 'c']);
    // The index of `a` and of `c` (used last, index written after): a version is both files.
    writeFileSync(path.join(dir, 'a.car.nodes'), Buffer.alloc(50));
    writeFileSync(path.join(dir, 'c.car.nodes'), Buffer.alloc(50));
    // An index whose CAR went, and one a crash cut short.
    writeFileSync(path.join(dir, 'gone.car.nodes'), Buffer.alloc(50));
    writeFileSync(path.join(dir, 'gone2.car.nodes.partial'), Buffer.alloc(50));
    // 150 + 100 + 150 = 400: `a` goes with its index, then `b`, as `b` and `c` are 250.
    await trimMetadataCache(dir, new Set(), 230);
    expect(readdirSync(dir).sort()).toEqual(['c.car', 'c.car.nodes', 'notes.txt']);
  });
});
