import { createHash, webcrypto } from 'node:crypto';

// SHA-256 of one block, off this thread when the block is large. Backup and restore hash every
// byte they move, on the thread that also reads, packs, serves and writes; WebCrypto's digest
// runs in the thread pool, so a second core can hash while this one does the rest. A small
// block is hashed here: handing it to the pool costs more than hashing it.

/** Below this size a block is hashed on the calling thread (measured crossover: about 100 KiB). */
const POOL_HASH_MIN_BYTES = 128 * 1024;

export async function sha256Digest(bytes: Uint8Array): Promise<Uint8Array> {
  if (bytes.length < POOL_HASH_MIN_BYTES) return createHash('sha256').update(bytes).digest();
  return new Uint8Array(await webcrypto.subtle.digest('SHA-256', bytes));
}
