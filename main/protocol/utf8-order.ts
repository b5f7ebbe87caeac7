// Names in the order of their UTF-8 bytes (the order of a UnixFS folder's links), compared
// without encoding them. JavaScript strings are UTF-16, and UTF-16 code units already sort as
// UTF-8 bytes do, with one exception: a surrogate (half of a character above U+FFFF, which
// UTF-8 writes with a lead byte of F0 or more) must sort after U+E000–U+FFFF (lead byte EE or
// EF), where UTF-16 puts it before. Encoding both names for each comparison cost a rescan of
// 100 000 files about 0.13 s, two Buffers per comparison.

/** A code unit's place in UTF-8 byte order: surrogates moved up past U+E000–U+FFFF. */
function utf8Rank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800;
}

/** Negative, zero or positive as `a` sorts before, with or after `b` by UTF-8 bytes. */
export function compareUtf8(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index += 1) {
    const x = a.charCodeAt(index);
    const y = b.charCodeAt(index);
    if (x !== y) return utf8Rank(x) - utf8Rank(y);
  }
  return a.length - b.length;
}
