import fc from 'fast-check';

// What happens to bytes on a failing disk or a hostile wire, for property tests of the readers
// of such bytes: a byte changed, a few cut out, or one put in, anywhere.

export type ByteChange = readonly ['set' | 'cut' | 'insert', number, number];

/** Up to `most` changes: where each falls is taken modulo the length at that point. */
export function byteChanges(most: number): fc.Arbitrary<ByteChange[]> {
  const change = fc.oneof(
    fc.tuple(fc.constant('set' as const), fc.nat(), fc.integer({ min: 0, max: 255 })),
    fc.tuple(fc.constant('cut' as const), fc.nat(), fc.nat({ max: 6 })),
    fc.tuple(fc.constant('insert' as const), fc.nat(), fc.integer({ min: 0, max: 255 })),
  );
  return fc.array(change, { maxLength: most });
}

/** `bytes` with `changes` made, in order. */
export function changed(bytes: Iterable<number>, changes: readonly ByteChange[]): Uint8Array {
  const out = [...bytes];
  for (const [kind, at, value] of changes) {
    const where = at % (out.length + 1);
    if (kind === 'set' && where < out.length) out[where] = value;
    else if (kind === 'cut') out.splice(where, value);
    else if (kind === 'insert') out.splice(where, 0, value);
  }
  return Uint8Array.from(out);
}
