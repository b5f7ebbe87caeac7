import { CID } from 'multiformats/cid';
import { Digest } from 'multiformats/hashes/digest';

// A CID made the usual way owns three byte arrays, each with a buffer of its own: about 900
// bytes of heap for 36 bytes of CID. A folder keeps its files' CIDs until the walk leaves it
// (tens of thousands in a large folder), so those it keeps are copied here into views of
// shared 64 KiB slabs: about 400 bytes each, and equal to the original in every use.

const SLAB_BYTES = 64 * 1024;

let slab = new Uint8Array(0);
let slabUsed = 0;

export function compactCid(cid: CID): CID {
  const bytes = cid.bytes;
  if (slabUsed + bytes.length > slab.length) {
    slab = new Uint8Array(SLAB_BYTES);
    slabUsed = 0;
  }
  const view = slab.subarray(slabUsed, slabUsed + bytes.length);
  slabUsed += bytes.length;
  view.set(bytes);
  // The multihash is the CID's tail, and the digest the multihash's tail.
  const multihash = view.subarray(bytes.length - cid.multihash.bytes.length);
  const digest = view.subarray(bytes.length - cid.multihash.digest.length);
  return new CID(
    cid.version,
    cid.code,
    new Digest(cid.multihash.code, cid.multihash.size, digest, multihash),
    view,
  );
}
