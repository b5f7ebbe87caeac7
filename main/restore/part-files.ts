import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import type { CID } from 'multiformats/cid';
import { RAW_CODEC } from '../protocol/index.ts';
import { CHUNK_BYTES } from '../packer/unixfs-settings.ts';

// A restore stopped part-way (Ctrl-C, a reboot, a kill, a link down too long) loses the files it
// was writing. For a large one, over a home link, that may be an hour's download. So a restore
// notes each large file it begins (RestoreMark.notePartFile), and one that stops keeps those
// under their temporary names; the next restore into the same place goes on with each: it reads
// the file's first leaves back from the part-written file, keeps those that match their CIDs,
// and fetches only the rest. Nothing is taken on trust: the first leaf that does not match (cut
// short by the kill, or changed since) and all after it are fetched again.

/** Files from this size on are noted as they are begun, and kept when their restore stops. */
export const PART_FILE_FROM_BYTES = 16 * 1024 * 1024;

/** A SHA-256 multihash's code: what the spec's raw leaves are named by. */
const SHA2_256 = 0x12;

/** The leading leaves a part-written file holds whole, and their bytes. */
export interface KeptLeaves {
  readonly leaves: number;
  readonly bytes: number;
}

/**
 * How many of `leaves` (a file's leaves in order, with their sizes) the file at `partFile`
 * holds whole from its start, each read back and hashed. A leaf not named by a SHA-256 raw CID
 * ends the count, as does the first that does not match or is cut short. Errors of reading the
 * file are thrown as they came.
 */
export async function keptLeaves(
  partFile: string,
  leaves: Iterable<{ readonly cid: CID; readonly size: number | undefined }>,
  /** Takes the bytes of each leaf read, as it is read. */
  onRead?: (bytes: number) => void,
): Promise<KeptLeaves> {
  const handle = await open(partFile, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    let count = 0;
    let bytes = 0;
    for (const { cid, size } of leaves) {
      if (cid.code !== RAW_CODEC || cid.multihash.code !== SHA2_256) break;
      if (size === undefined || size > buffer.length) break;
      let read = 0;
      while (read < size) {
        const { bytesRead } = await handle.read(buffer, read, size - read, bytes + read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      onRead?.(read);
      if (read < size) break;
      const digest = createHash('sha256').update(buffer.subarray(0, size)).digest();
      if (!digest.equals(cid.multihash.digest)) break;
      count += 1;
      bytes += size;
    }
    return { leaves: count, bytes };
  } finally {
    await handle.close();
  }
}
