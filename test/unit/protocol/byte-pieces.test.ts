import { describe, expect, it } from 'vitest';
import { lengthOfPieces, piecesAfter } from '../../../main/protocol/index.ts';

const text = (pieces: readonly Uint8Array[]): string => Buffer.concat(pieces).toString();

describe('piecesAfter', () => {
  const pieces = [Buffer.from('abc'), Buffer.from(''), Buffer.from('defg'), Buffer.from('h')];

  it('leaves exactly the bytes a short write did not take, whatever piece it ended in', () => {
    const all = text(pieces);
    for (let written = 0; written <= lengthOfPieces(pieces); written += 1) {
      const rest = piecesAfter(pieces, written);
      expect(text(rest)).toBe(all.slice(written));
      expect(lengthOfPieces(rest)).toBe(all.length - written);
    }
    expect(piecesAfter(pieces, lengthOfPieces(pieces))).toEqual([]);
  });

  it('leaves the pieces it was given as they were', () => {
    piecesAfter(pieces, 5);
    expect(pieces.map(String)).toEqual(['abc', '', 'defg', 'h']);
  });
});
