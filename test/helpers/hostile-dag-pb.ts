import fc from 'fast-check';
import { encodeVarint } from '../../main/protocol/index.ts';
import { byteChanges, changed } from './byte-damage.ts';

// dag-pb nodes made field by field, for the hand-written readers of nodes (DagPbLinks,
// quickShapeOf) to be checked against @ipld/dag-pb and ipfs-unixfs: fields in any order and
// number, of the wire type they should have or another, then bytes changed, cut and put in, as
// a damaged or hostile node has them.

/** A protobuf varint (the same LEB128 as a CAR's). */
export function varint(value: number): number[] {
  return [...encodeVarint(value)];
}

/** A length-delimited field: tag, length, bytes. */
export function delimited(tag: number, bytes: Uint8Array | readonly number[]): number[] {
  return [tag, ...varint(bytes.length), ...bytes];
}

const digest = fc.uint8Array({ minLength: 32, maxLength: 32 });
const cidBytes = fc.oneof(
  // A CIDv1 of raw, dag-pb or dag-cbor, sha2-256: the shape Canopy writes and reads by hand.
  fc
    .tuple(fc.constantFrom(0x55, 0x70, 0x71), digest)
    .map(([codec, bytes]) => Uint8Array.from([0x01, codec, 0x12, 0x20, ...bytes])),
  // Anything else: another hash, version or length.
  fc.uint8Array({ maxLength: 40 }),
);
const nameBytes = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 6 }).map((text) => new TextEncoder().encode(text)),
  fc.uint8Array({ maxLength: 6 }),
);
/** A field of no meaning where it stands, or of the wrong wire type. */
const strayField = fc.constantFrom([0x20, 0x01], [0x1a, 0x00], [0x08, 0x05], [0x12]);
/** A PBLink field: Hash (1), Name (2), Tsize (3), or a stray one. */
const linkField = fc.oneof(
  cidBytes.map((bytes) => delimited(0x0a, bytes)),
  nameBytes.map((bytes) => delimited(0x12, bytes)),
  fc.maxSafeNat().map((size) => [0x18, ...varint(size)]),
  strayField,
);
/** A PBLink's bytes, most often Hash, Name and Tsize in that order. */
const link = fc.oneof(
  fc
    .tuple(cidBytes, fc.option(nameBytes), fc.option(fc.maxSafeNat()))
    .map(([hash, name, tsize]) => [
      ...delimited(0x0a, hash),
      ...(name === null ? [] : delimited(0x12, name)),
      ...(tsize === null ? [] : [0x18, ...varint(tsize)]),
    ]),
  fc.array(linkField, { maxLength: 4 }).map((fields) => fields.flat()),
);

/** UnixFS Data fields (ipfs-unixfs's PBData), of their wire types or others. */
const unixfsField = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 7 }).map((type) => [0x08, ...varint(type)]) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 8 }).map((data) => delimited(0x12, data)) },
  { weight: 1, arbitrary: fc.maxSafeNat().map((size) => [0x18, ...varint(size)]) },
  {
    weight: 3,
    arbitrary: fc
      .oneof(fc.nat({ max: 2 ** 21 }), fc.maxSafeNat())
      .map((size) => [0x20, ...varint(size)]),
  },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.nat({ max: 2 ** 21 }), { maxLength: 3 })
      .map((sizes) => delimited(0x22, sizes.flatMap(varint))),
  },
  { weight: 1, arbitrary: fc.nat({ max: 0o7777 }).map((mode) => [0x38, ...varint(mode)]) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.maxSafeNat(), fc.nat({ max: 999_999_999 }))
      .map(([secs, nsecs]) =>
        delimited(0x42, [
          0x08,
          ...varint(secs),
          0x15,
          ...new Uint8Array(new Uint32Array([nsecs]).buffer),
        ]),
      ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      [0x11, 1, 2, 3, 4, 5, 6, 7, 8],
      [0x25, 1, 2, 3, 4],
      [0x15, 1, 2, 3, 4],
      [0x0a, 0x00],
      [0x28, 0x22],
      [0x30, 0x80, 0x02],
      [0x4b],
    ),
  },
);
/** UnixFS Data: most often Type first, as ipfs-unixfs writes it. */
export const unixfsData = fc
  .tuple(fc.option(fc.integer({ min: 0, max: 5 })), fc.array(unixfsField, { maxLength: 5 }))
  .map(([type, fields]) => [...(type === null ? [] : [0x08, ...varint(type)]), ...fields.flat()]);

/**
 * A dag-pb node's bytes: PBNode fields (Data of `data`, Links, stray ones) in any order and
 * number, most often Data then Links, then up to two bytes changed, cut or put in.
 */
export function hostileDagPb(data: fc.Arbitrary<number[]>): fc.Arbitrary<Uint8Array> {
  const dataField = data.map((bytes) => delimited(0x0a, bytes));
  const linkFields = fc.array(
    link.map((bytes) => delimited(0x12, bytes)),
    { maxLength: 3 },
  );
  const nodeField = fc.oneof(
    { weight: 1, arbitrary: dataField },
    { weight: 3, arbitrary: link.map((bytes) => delimited(0x12, bytes)) },
    { weight: 1, arbitrary: strayField },
  );
  const fields = fc.oneof(
    fc
      .tuple(fc.option(dataField), linkFields)
      .map(([first, links]) => [...(first ?? []), ...links.flat()]),
    fc.array(nodeField, { maxLength: 5 }).map((all) => all.flat()),
  );
  return fc.tuple(fields, byteChanges(2)).map(([bytes, changes]) => changed(bytes, changes));
}
