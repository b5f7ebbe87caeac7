import { createHash } from 'node:crypto';
import { closeSync, openSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChunkHasher } from '../../../main/packer/chunk-hasher.ts';
import { CHUNK_BYTES } from '../../../main/packer/unixfs-settings.ts';

// The hasher reads a large file's chunks and gives each one's SHA-256, which becomes its CID:
// a wrong one stores a chunk under another's name. A pack that stops closes its hasher: a read
// still waiting then, or asked for after, must fail with a clear error rather than hang the pack.

const dir = mkdtempSync(join(tmpdir(), 'canopy-hasher-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ChunkHasher', () => {
  it('gives the SHA-256 of each chunk, whole chunks of zeros and ones nearly so alike', async () => {
    const zeros = Buffer.alloc(CHUNK_BYTES);
    const lastByteSet = Buffer.alloc(CHUNK_BYTES);
    lastByteSet[CHUNK_BYTES - 1] = 1;
    const firstByteSet = Buffer.alloc(CHUNK_BYTES);
    firstByteSet[0] = 1;
    const shortZeros = Buffer.alloc(1000);
    const chunks = [zeros, lastByteSet, zeros, firstByteSet, shortZeros];
    const file = join(dir, 'mostly-zeros');
    writeFileSync(file, Buffer.concat(chunks));
    const fd = openSync(file, 'r');
    const hasher = new ChunkHasher(1);
    try {
      for (const [index, chunk] of chunks.entries()) {
        const slot = hasher.takeSlot();
        const hashed = await hasher.read(fd, index * CHUNK_BYTES, CHUNK_BYTES, slot);
        expect(Buffer.from(hashed.bytes).equals(chunk)).toBe(true);
        expect(Buffer.from(hashed.digest).toString('hex')).toBe(
          createHash('sha256').update(chunk).digest('hex'),
        );
        hasher.giveSlot(slot);
      }
    } finally {
      closeSync(fd);
      await hasher.close();
    }
  });

  it('gives each chunk its own SHA-256 when several are read at once on several threads', async () => {
    const chunks = Array.from({ length: 6 }, (_, index) => Buffer.alloc(CHUNK_BYTES, index + 1));
    const file = join(dir, 'six-chunks');
    writeFileSync(file, Buffer.concat(chunks));
    const fd = openSync(file, 'r');
    const hasher = new ChunkHasher(chunks.length, 3);
    try {
      const hashed = await Promise.all(
        chunks.map((_, index) =>
          hasher.read(fd, index * CHUNK_BYTES, CHUNK_BYTES, hasher.takeSlot()),
        ),
      );
      for (const [index, chunk] of chunks.entries()) {
        const got = hashed[index];
        expect(got && Buffer.from(got.bytes).equals(chunk)).toBe(true);
        expect(got && Buffer.from(got.digest).toString('hex')).toBe(
          createHash('sha256').update(chunk).digest('hex'),
        );
      }
    } finally {
      closeSync(fd);
      await hasher.close();
    }
  });

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
