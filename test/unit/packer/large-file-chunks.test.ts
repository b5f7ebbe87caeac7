import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChunkBuffers, largeFileChunks } from '../../../main/packer/large-file-chunks.ts';

const MIB = 1024 * 1024;

describe('largeFileChunks', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'canopy-chunks-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /**
   * The chunks' lengths and bytes, each copied before the next is asked for, of a file holding
   * `content` that the scan saw with `expected` bytes.
   */
  async function chunksOf(
    content: Uint8Array,
    buffers: ChunkBuffers,
    expected = content.length,
  ): Promise<{ lengths: number[]; bytes: Buffer }> {
    const path = join(dir, `f-${content.length}`);
    await writeFile(path, content);
    const fd = openSync(path, 'r');
    try {
      const copies: Buffer[] = [];
      for await (const chunk of largeFileChunks(fd, expected, buffers))
        copies.push(Buffer.from(chunk));
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
    const chunks = await chunksOf(content, new ChunkBuffers());
    expect(chunks.lengths).toEqual(lengths);
    expect(chunks.bytes.equals(content)).toBe(true);
  });

  it('reads only the bytes the scan saw of a file that grew, and what is left of one that shrank', async () => {
    const content = randomBytes(2 * MIB + 10);
    const grown = await chunksOf(content, new ChunkBuffers(), MIB + 3);
    expect(grown.lengths).toEqual([MIB, 3]);
    expect(grown.bytes.equals(content.subarray(0, MIB + 3))).toBe(true);
    const shrunk = await chunksOf(content, new ChunkBuffers(), 3 * MIB);
    expect(shrunk.lengths).toEqual([MIB, MIB, 10]);
    expect(shrunk.bytes.equals(content)).toBe(true);
  });

  it('ends at the end of a file that shrank to a whole number of chunks', async () => {
    const content = randomBytes(2 * MIB);
    const shrunk = await chunksOf(content, new ChunkBuffers(), 3 * MIB);
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
      for await (const chunk of largeFileChunks(fd, content.length, new ChunkBuffers())) {
        const copy = Buffer.from(chunk);
        // Long enough for the read ahead, into the other buffer, to be done.
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(Buffer.from(chunk).equals(copy)).toBe(true);
        expect(copy.equals(content.subarray(offset, offset + copy.length))).toBe(true);
        offset += copy.length;
      }
      expect(offset).toBe(content.length);
    } finally {
      closeSync(fd);
    }
  });

  it('reads every file into the same two pooled buffers, returned however the reading ends', async () => {
    const buffers = new ChunkBuffers();
    await chunksOf(randomBytes(MIB + 5), buffers);
    const pooled = [buffers.take(), buffers.take()];
    for (const buffer of pooled) buffers.give(buffer);

    const path = join(dir, 'stopped-early');
    await writeFile(path, randomBytes(3 * MIB));
    const fd = openSync(path, 'r');
    try {
      for await (const chunk of largeFileChunks(fd, 3 * MIB, buffers)) {
        expect(pooled.map((buffer) => buffer.buffer)).toContain(chunk.buffer);
        break;
      }
    } finally {
      closeSync(fd);
    }
    // Both are back, the one the next chunk was being read into as well, and no third was made.
    const back = [buffers.take(), buffers.take()];
    expect(back[0] !== back[1] && back.every((buffer) => pooled.includes(buffer))).toBe(true);
    expect(pooled.includes(buffers.take())).toBe(false);
  });
});
