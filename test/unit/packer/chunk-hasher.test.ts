import { closeSync, openSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChunkHasher } from '../../../main/packer/chunk-hasher.ts';

// A pack that stops closes its hasher: a read still waiting then, or asked for after, must
// fail with a clear error rather than hang the pack.

const dir = mkdtempSync(join(tmpdir(), 'canopy-hasher-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ChunkHasher', () => {
  it('fails the reads waiting when it is closed, and every read after', async () => {
    const file = join(dir, 'data');
    writeFileSync(file, Buffer.alloc(64 * 1024, 7));
    const fd = openSync(file, 'r');
    const hasher = new ChunkHasher(2);
    try {
      // Its failure is awaited from the start, as the packer's reads are marked handled.
      const waiting = expect(hasher.read(fd, 0, 64 * 1024, hasher.takeSlot())).rejects.toThrow(
        'the hashing worker was closed',
      );
      await hasher.close();
      await waiting;
      await expect(hasher.read(fd, 0, 1, hasher.takeSlot())).rejects.toThrow(
        'the hashing worker was closed',
      );
    } finally {
      closeSync(fd);
    }
  });
});
