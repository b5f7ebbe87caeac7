import { createHash, randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChunkHasher } from '../../../main/packer/chunk-hasher.ts';
import { ChunkReadError, largeFileChunks } from '../../../main/packer/large-file-chunks.ts';

const MIB = 1024 * 1024;

describe('largeFileChunks', () => {
  let dir: string;
  /** Two slots: the most one file holds, so a slot not given back shows at once. */
  let hasher: ChunkHasher;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'canopy-chunks-'));
    hasher = new ChunkHasher(2);
  });
  afterAll(async () => {
    await hasher.close();
    await rm(dir, { recursive: true, force: true });
  });

  const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

  /**
   * The chunks' lengths and bytes, each copied before the next is asked for, of a file holding
   * `content` that the scan saw with `expected` bytes.
   */
  async function chunksOf(
    content: Uint8Array,
    expected = content.length,
  ): Promise<{ lengths: number[]; bytes: Buffer }> {
    const path = join(dir, `f-${content.length}`);
    await writeFile(path, content);
    const fd = openSync(path, 'r');
    try {
      const copies: Buffer[] = [];
      for await (const chunk of largeFileChunks(fd, expected, hasher)) {
        // Each chunk's hash is that of its own bytes.
        expect(Buffer.from(chunk.digest).toString('hex')).toBe(sha256(chunk.bytes));
        copies.push(Buffer.from(chunk.bytes));
      }
      return { lengths: copies.map((copy) => copy.length), bytes: Buffer.concat(copies) };
    } finally {
      closeSync(fd);
    }
  }

  it.each([
    [0, [0]],
    [MIB, [MIB]],
    [MIB + 1, [MIB, 1]],
    [MIB - 1, [MIB - 1]],
    [2 * MIB + MIB / 2, [MIB, MIB, MIB / 2]],
  ])('cuts a file of %i bytes into fixed 1 MiB chunks %j, in order', async (size, lengths) => {
    const content = randomBytes(size);
    const chunks = await chunksOf(content);
    expect(chunks.lengths).toEqual(lengths);
    expect(chunks.bytes.equals(content)).toBe(true);
  });

  it('reads only the bytes the scan saw of a file that grew, and what is left of one that shrank', async () => {
    const content = randomBytes(2 * MIB + 10);
    const grown = await chunksOf(content, MIB + 3);
    expect(grown.lengths).toEqual([MIB, 3]);
    expect(grown.bytes.equals(content.subarray(0, MIB + 3))).toBe(true);
    const shrunk = await chunksOf(content, 3 * MIB);
    expect(shrunk.lengths).toEqual([MIB, MIB, 10]);
    expect(shrunk.bytes.equals(content)).toBe(true);
  });

  it('ends at the end of a file that shrank to a whole number of chunks', async () => {
    const content = randomBytes(2 * MIB);
    const shrunk = await chunksOf(content, 3 * MIB);
    expect(shrunk.lengths).toEqual([MIB, MIB]);
    expect(shrunk.bytes.equals(content)).toBe(true);
  });

  it('leaves a chunk untouched while the next one is read ahead', async () => {
    const content = randomBytes(4 * MIB + 7);
    const path = join(dir, 'read-ahead');
    await writeFile(path, content);
    const fd = openSync(path, 'r');
    try {
      let offset = 0;
      for await (const chunk of largeFileChunks(fd, content.length, hasher)) {
        const copy = Buffer.from(chunk.bytes);
        // Long enough for the read ahead, into the other slot, to be done.
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(Buffer.from(chunk.bytes).equals(copy)).toBe(true);
        expect(copy.equals(content.subarray(offset, offset + copy.length))).toBe(true);
        offset += copy.length;
      }
      expect(offset).toBe(content.length);
    } finally {
      closeSync(fd);
    }
  });

  it('gives both slots back, however the reading ends', async () => {
    await chunksOf(randomBytes(MIB + 5));
    const path = join(dir, 'stopped-early');
    await writeFile(path, randomBytes(3 * MIB));
    const fd = openSync(path, 'r');
    try {
      // Stopped after the first chunk, with the second being read ahead.
      for await (const chunk of largeFileChunks(fd, 3 * MIB, hasher)) {
        expect(chunk.bytes.length).toBe(MIB);
        break;
      }
    } finally {
      closeSync(fd);
    }
    const slots = [hasher.takeSlot(), hasher.takeSlot()];
    expect(() => hasher.takeSlot()).toThrow(/no chunk slot/);
    for (const slot of slots) hasher.giveSlot(slot);
  });

  it('fails with a ChunkReadError holding the file-system error of a read that fails, and gives its slots back', async () => {
    // A folder opens, but reading it fails.
    const fd = openSync(dir, 'r');
    try {
      const reading = (async () => {
        for await (const chunk of largeFileChunks(fd, 2 * MIB, hasher)) void chunk;
      })();
      // Told apart from a failure of what is done with the chunks: the file is skipped for it.
      await expect(reading).rejects.toBeInstanceOf(ChunkReadError);
      await expect(reading).rejects.toMatchObject({ code: 'EISDIR', cause: { code: 'EISDIR' } });
    } finally {
      closeSync(fd);
    }
    const slots = [hasher.takeSlot(), hasher.takeSlot()];
    for (const slot of slots) hasher.giveSlot(slot);
  });
});
