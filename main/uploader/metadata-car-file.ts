import { open } from 'node:fs/promises';
import type { CID } from 'multiformats/cid';
import { encodeCarHeader, encodeCarSectionHead } from '../protocol/index.ts';

// A version's metadata CAR, written to a file section by section. A tree of 100 000 files has
// a metadata CAR of about 16 MB; made whole in memory, then copied into the request, it and
// its copies were the largest share of a backup's peak memory. From a file it is sent, and
// kept in the local metadata cache, without ever being held whole.

const WRITE_BYTES = 1 << 20;

/** Writes a CARv1 of `blocks` under `roots` to `file` (created; it must not exist). Returns its size. */
export async function writeMetadataCarFile(
  file: string,
  roots: readonly CID[],
  blocks: Iterable<{ cid: CID; bytes: Uint8Array }>,
): Promise<number> {
  const handle = await open(file, 'wx', 0o600);
  try {
    const pending = Buffer.allocUnsafe(WRITE_BYTES);
    let used = 0;
    let written = 0;
    /** Writes all of `bytes`: a write may take fewer than it was given. */
    const writeAll = async (bytes: Uint8Array): Promise<void> => {
      for (let offset = 0; offset < bytes.length;) {
        const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
        offset += bytesWritten;
      }
      written += bytes.length;
    };
    const append = async (bytes: Uint8Array): Promise<void> => {
      if (used + bytes.length > WRITE_BYTES && used > 0) {
        await writeAll(pending.subarray(0, used));
        used = 0;
      }
      if (bytes.length > WRITE_BYTES) await writeAll(bytes);
      else {
        pending.set(bytes, used);
        used += bytes.length;
      }
    };
    await append(encodeCarHeader(roots));
    for (const block of blocks) {
      await append(encodeCarSectionHead(block.cid, block.bytes.length));
      await append(block.bytes);
    }
    await writeAll(pending.subarray(0, used));
    return written;
  } finally {
    await handle.close();
  }
}
