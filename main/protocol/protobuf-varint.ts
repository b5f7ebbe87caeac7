// A protobuf varint (unsigned LEB128), read where the readers of dag-pb nodes and their UnixFS
// Data stand (dag-pb-links.ts, restore/quick-shape.ts); unlike a CAR's (car-reader.ts), which
// refuses what a reader did not expect, it tells the caller to decode the node another way.

/** The varint at `cursor.at`, moved past it; -1 when cut short before `end` or past 2^53. */
export function protobufVarintAt(bytes: Uint8Array, cursor: { at: number }, end: number): number {
  let value = 0;
  let scale = 1;
  for (;;) {
    const byte = cursor.at < end ? bytes[cursor.at] : undefined;
    if (byte === undefined || scale > 2 ** 49) return -1;
    cursor.at += 1;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return value;
    scale *= 128;
  }
}
