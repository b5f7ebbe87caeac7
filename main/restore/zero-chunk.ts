import { createHash } from 'node:crypto';
import type { CID } from 'multiformats/cid';
import { CHUNK_BYTES } from '../packer/unixfs-settings.ts';
import { RAW_CODEC } from '../protocol/index.ts';

// A whole chunk of zeros: the only leaf a sparse restore leaves as a hole. Its CID names its
// bytes, so it is known without being fetched, and every file's zeros share it: a disk image's
// unused space, a preallocated database. Shorter runs of zeros (a file's last chunk) are
// written as any other bytes.

let zeroDigest: Buffer | undefined;

/** Whether `cid` is the raw leaf of CHUNK_BYTES zero bytes. */
export function isZeroChunk(cid: CID): boolean {
  if (cid.code !== RAW_CODEC) return false;
  zeroDigest ??= createHash('sha256').update(Buffer.alloc(CHUNK_BYTES)).digest();
  return zeroDigest.equals(cid.multihash.digest);
}
