import { describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { sha256Of, sha256OfPieces } from '../../../main/protocol/index.ts';

// The one-shot digest every block is checked with gives what a streamed SHA-256 gives, for a
// block whole, a view into a larger buffer, and a block that arrived in pieces.

const streamed = (bytes: Uint8Array): Buffer => createHash('sha256').update(bytes).digest();

describe('sha256Of', () => {
  it('digests a block, an empty one, and a view into a larger buffer as SHA-256 does', () => {
    const block = randomBytes(300);
    expect(sha256Of(block).equals(streamed(block))).toBe(true);
    expect(sha256Of(new Uint8Array(0)).toString('hex')).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
    const view = new Uint8Array(block.buffer, block.byteOffset + 10, 100);
    expect(sha256Of(view).equals(streamed(Buffer.from(view)))).toBe(true);
  });

  it('digests a block in pieces as the same bytes whole', () => {
    const block = randomBytes(1000);
    for (const cuts of [[], [1], [500], [1, 2, 999], [0, 0, 1000]]) {
      const pieces: Uint8Array[] = [];
      let from = 0;
      for (const cut of [...cuts, block.length]) {
        pieces.push(block.subarray(from, cut));
        from = cut;
      }
      expect(sha256OfPieces(pieces).equals(streamed(block))).toBe(true);
    }
    expect(sha256OfPieces([]).equals(streamed(new Uint8Array(0)))).toBe(true);
  });
});
