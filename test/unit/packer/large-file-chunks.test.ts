import { randomBytes } from 'node:crypto';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
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

  /** The chunks' lengths and bytes, each copied before the next is asked for. */
  async function chunksOf(
    content: Uint8Array,
    buffers: ChunkBuffers,
  ): Promise<{ lengths: number[]; bytes: Buffer }> {
    const path = join(dir, `f-${content.length}`);
    await writeFile(path, content);
    const handle = await open(path, 'r');
    try {
      const copies: Buffer[] = [];
      for await (const chunk of largeFileChunks(handle, buffers)) copies.push(Buffer.from(chunk));
      return { lengths: copies.map((copy) => copy.length), bytes: Buffer.concat(copies) };
    } finally {
      await handle.close();
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

  it('reads every file into the same pooled buffer, returned however the reading ends', async () => {
    const buffers = new ChunkBuffers();
    await chunksOf(randomBytes(MIB + 5), buffers);
    const pooled = buffers.take();
    buffers.give(pooled);

    const path = join(dir, 'stopped-early');
    await writeFile(path, randomBytes(3 * MIB));
    const handle = await open(path, 'r');
    try {
      for await (const chunk of largeFileChunks(handle, buffers)) {
        expect(chunk.buffer).toBe(pooled.buffer);
        break;
      }
    } finally {
      await handle.close();
    }
    expect(buffers.take()).toBe(pooled);
  });
});
