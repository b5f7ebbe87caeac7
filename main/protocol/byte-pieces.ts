// Bytes held as the pieces they arrived in (a CAR block's, see CarBlock), written out with one
// writev instead of being copied together first. Pure helpers, shared with the server.

/** The bytes in all of `pieces`. */
export function lengthOfPieces(pieces: readonly Uint8Array[]): number {
  let length = 0;
  for (const piece of pieces) length += piece.length;
  return length;
}

/** What is left of `pieces` once their first `count` bytes are written (a short write). */
export function piecesAfter(pieces: readonly Uint8Array[], count: number): Uint8Array[] {
  let left = count;
  let index = 0;
  while (index < pieces.length && left >= (pieces[index]?.length ?? 0)) {
    left -= pieces[index]?.length ?? 0;
    index += 1;
  }
  const rest = pieces.slice(index);
  const first = rest[0];
  if (first && left > 0) rest[0] = first.subarray(left);
  return rest;
}
