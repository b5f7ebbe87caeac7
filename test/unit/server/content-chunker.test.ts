import { describe, expect, it } from 'vitest';
import {
  ContentChunker,
  MAX_CHUNK_BYTES,
  MIN_CHUNK_BYTES,
  type ContentChunk,
} from '../../../server/blocks/content-chunker.ts';
import { seededBytes } from '../../helpers/seeded-random.ts';

// Metadata CARs are kept as chunks cut where their content says (content-chunker.ts): the same
// bytes give the same chunks however they arrive, and bytes inserted or changed in one place
// change the chunks around that place only, so the rest is stored once for every version.
// The bytes look random and come from a fixed seed, so a failure repeats (CHUNK_SEED=N tries
// other bytes).

const seed = Number(process.env['CHUNK_SEED'] ?? 20261128);

function chunksOf(bytes: Uint8Array, piece = bytes.length): ContentChunk[] {
  const chunker = new ContentChunker();
  for (let at = 0; at < bytes.length; at += piece) chunker.push(bytes.subarray(at, at + piece));
  return chunker.end();
}

const digests = (chunks: readonly ContentChunk[]): string[] =>
  chunks.map((chunk) => chunk.digest.toString('hex'));

describe('content-defined chunks', () => {
  const bytes = seededBytes(seed, 3 * 1024 * 1024);

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
    const before = chunksOf(bytes);
    const known = new Set(digests(before));
    const at = 1_500_000;
    const edits = {
      inserted: Buffer.concat([
        bytes.subarray(0, at),
        seededBytes(seed + 1, 100),
        bytes.subarray(at),
      ]),
      removed: Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 100)]),
      changed: Buffer.concat([
        bytes.subarray(0, at),
        seededBytes(seed + 2, 100),
        bytes.subarray(at + 100),
      ]),
    };
    for (const [edit, edited] of Object.entries(edits)) {
      const after = chunksOf(edited);
      const fresh = after.flatMap((chunk, index) =>
        known.has(chunk.digest.toString('hex')) ? [] : [index],
      );
      const label = `${edit} (seed ${seed})`;
      // Chunks that end before the edit are those of before; the new ones follow each other...
      expect(fresh.length, label).toBeGreaterThan(0);
      expect(after[fresh[0] ?? 0]!.offset + after[fresh[0] ?? 0]!.length, label).toBeGreaterThan(
        at,
      );
      expect(fresh, label).toEqual(fresh.map((_, n) => (fresh[0] ?? 0) + n));
      // ...and hold two cuts the content chose at most: chunks cut at the maximum shift with an
      // insertion or a removal until the content cuts again, and an inserted byte run can hold a
      // cut of its own. Every chunk after them is one of before.
      const cutByContent = fresh.filter((index) => after[index]!.length < MAX_CHUNK_BYTES);
      expect(cutByContent.length, label).toBeLessThanOrEqual(2);
      const freshBytes = fresh.reduce((sum, index) => sum + after[index]!.length, 0);
      expect(freshBytes, label).toBeLessThan(edited.length / 4);
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
