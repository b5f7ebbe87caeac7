import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  ContentChunker,
  MAX_CHUNK_BYTES,
  MIN_CHUNK_BYTES,
  type ContentChunk,
} from '../../../server/blocks/content-chunker.ts';

// Metadata CARs are kept as chunks cut where their content says (content-chunker.ts): the same
// bytes give the same chunks however they arrive, and bytes inserted or changed in one place
// change the chunks around that place only, so the rest is stored once for every version.

function chunksOf(bytes: Uint8Array, piece = bytes.length): ContentChunk[] {
  const chunker = new ContentChunker();
  for (let at = 0; at < bytes.length; at += piece) chunker.push(bytes.subarray(at, at + piece));
  return chunker.end();
}

const digests = (chunks: readonly ContentChunk[]): string[] =>
  chunks.map((chunk) => chunk.digest.toString('hex'));

describe('content-defined chunks', () => {
  const bytes = randomBytes(3 * 1024 * 1024);

  it('cover the bytes end to end, within the size bounds, whatever pieces they arrive in', () => {
    const chunks = chunksOf(bytes);
    let offset = 0;
    for (const [index, chunk] of chunks.entries()) {
      expect(chunk.offset).toBe(offset);
      expect(chunk.length).toBeLessThanOrEqual(MAX_CHUNK_BYTES);
      if (index < chunks.length - 1) expect(chunk.length).toBeGreaterThan(MIN_CHUNK_BYTES);
      offset += chunk.length;
    }
    expect(offset).toBe(bytes.length);
    // About 40 KiB each on random bytes: neither all at the minimum nor all at the maximum.
    expect(chunks.length).toBeGreaterThan(30);
    expect(chunks.length).toBeLessThan(200);
    for (const piece of [1000, 8192, 65_537, 1 << 20])
      expect(digests(chunksOf(bytes, piece))).toEqual(digests(chunks));
  });

  it('change only around bytes inserted, removed or changed', () => {
    const before = new Set(digests(chunksOf(bytes)));
    const at = 1_500_000;
    const edits = [
      Buffer.concat([bytes.subarray(0, at), randomBytes(100), bytes.subarray(at)]),
      Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 100)]),
      Buffer.concat([bytes.subarray(0, at), randomBytes(100), bytes.subarray(at + 100)]),
    ];
    for (const edited of edits) {
      const after = digests(chunksOf(edited));
      const fresh = after.filter((digest) => !before.has(digest));
      expect(fresh.length).toBeGreaterThan(0);
      expect(fresh.length).toBeLessThanOrEqual(2);
    }
  });

  it('cut bytes that never meet the mask at the maximum, and an empty input into none', () => {
    const zeros = new Uint8Array(5 * MAX_CHUNK_BYTES + 10);
    expect(chunksOf(zeros).map((chunk) => chunk.length)).toEqual([
      ...Array.from({ length: 5 }, () => MAX_CHUNK_BYTES),
      10,
    ]);
    expect(chunksOf(new Uint8Array(0))).toEqual([]);
  });
});
