import { createHash } from 'node:crypto';
import type { CID } from 'multiformats/cid';
import { CHUNK_BYTES } from '../packer/unixfs-settings.ts';
import { cidFromSha256, RAW_CODEC } from '../protocol/index.ts';

// A whole chunk of zeros: the only leaf a sparse restore leaves as a hole. Its CID names its
// bytes, so it is known without being fetched, and every file's zeros share it: a disk image's
// unused space, a preallocated database. Shorter runs of zeros (a file's last chunk) are
// written as any other bytes.

let zeroDigest: Buffer | undefined;

function digestOfZeros(): Buffer {
  zeroDigest ??= createHash('sha256').update(Buffer.alloc(CHUNK_BYTES)).digest();
  return zeroDigest;
}

/** Whether `cid` is the raw leaf of CHUNK_BYTES zero bytes. */
export function isZeroChunk(cid: CID): boolean {
  return cid.code === RAW_CODEC && digestOfZeros().equals(cid.multihash.digest);
}

/** The raw leaf of CHUNK_BYTES zero bytes. */
export function zeroChunkCid(): CID {
  return cidFromSha256(RAW_CODEC, digestOfZeros());
}
