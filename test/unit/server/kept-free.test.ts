import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { admitIntoKeptFree } from '../../../server/store/kept-free.ts';

// New data is let into the data folder only while the room kept free stays free, counting the
// data let in before it and still arriving: two shards at once must not each take the same
// room.

const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-kept-free-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MiB = 1024 * 1024;

describe('the room kept free', () => {
  it('counts the data let in and not yet released against the free space', () => {
    const disk = statfsSync(dir);
    const free = disk.bavail * disk.bsize;
    // Room for 1000 MiB of new data, whatever the disk.
    const kept = { fraction: 1, maxBytes: free - 1000 * MiB };
    expect(kept.maxBytes).toBeGreaterThan(0);
    const first = admitIntoKeptFree(dir, 600 * MiB, kept);
    expect(() => admitIntoKeptFree(dir, 600 * MiB, kept)).toThrow(
      expect.objectContaining({ code: 'ENOSPC' }),
    );
    first();
    // Released (written, or refused), its bytes no longer count; releasing again changes nothing.
    first();
    const second = admitIntoKeptFree(dir, 600 * MiB, kept);
    const third = admitIntoKeptFree(dir, 300 * MiB, kept);
    second();
    third();
    // Nothing is kept free when the service was told to keep nothing.
    admitIntoKeptFree(dir, 2 * free, null)();
  });
});
