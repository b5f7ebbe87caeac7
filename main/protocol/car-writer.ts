import * as dagCbor from '@ipld/dag-cbor';
import type { CID } from 'multiformats/cid';
import { encodeVarint } from './car-reader.ts';

// CARv1 framing for streaming writers that send blocks straight from disk. The header is the
// same DAG-CBOR map @ipld/car writes ({version: 1, roots}); each section is then
// varint(length) ‖ CID bytes ‖ block bytes.

export function encodeCarHeader(roots: readonly CID[]): Uint8Array {
  const header = dagCbor.encode({ version: 1, roots: [...roots] });
  return Buffer.concat([encodeVarint(header.length), header]);
}

/** A section's framing; any CID-like value with the CID's bytes will do. */
export function encodeCarSectionHead(
  cid: { readonly bytes: Uint8Array },
  blockLength: number,
): Uint8Array {
  return Buffer.concat([encodeVarint(cid.bytes.length + blockLength), cid.bytes]);
}

/** A whole CARv1 in memory, for small CARs such as a version's metadata. */
export function encodeCar(
  roots: readonly CID[],
  blocks: Iterable<{ cid: CID; bytes: Uint8Array }>,
): Uint8Array {
  const parts: Uint8Array[] = [encodeCarHeader(roots)];
  for (const block of blocks)
    parts.push(encodeCarSectionHead(block.cid, block.bytes.length), block.bytes);
  return Buffer.concat(parts);
}
