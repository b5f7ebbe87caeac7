import type { ChunkHasher, HashedChunk } from './chunk-hasher.ts';
import { CHUNK_BYTES } from './unixfs-settings.ts';
import { ThreadFailure } from '../api/index.ts';

// Reading a file in 1 MiB chunks, each hashed as it is read, on the hasher's worker thread
// (chunk-hasher.ts), into two slots of its shared memory in turn. Fresh memory per chunk is
// garbage outside the JS heap, which V8 collects only after about 64 MB of it has piled up:
// on a 4 GiB backup it was a fifth of the process's peak memory. Each file read at the same
// time holds two slots, however many bytes it has.
//
// Only as many bytes as the scan saw are read: an extra read to find the end of the file made
// 1 MiB files pack at half the speed of hashing them. A file that grew meanwhile is the
// caller's to notice, by its size after the read.

/**
 * A read of the file failed part way (a damaged sector gives EIO): the file cannot be read,
 * which is the file's problem, not the backup's. Told apart from a failure of what the caller
 * does with the chunks (a full disk under the staged shards), which is the backup's. `code` is
 * the file-system error's.
 */
export class ChunkReadError extends Error {
  readonly code: string | undefined;
  /** The file-system error of the read. */
  declare readonly cause: unknown;
  constructor(readError: unknown) {
    super(readError instanceof Error ? readError.message : String(readError), {
      cause: readError,
    });
    this.name = 'ChunkReadError';
    this.code = (readError as NodeJS.ErrnoException | undefined)?.code;
  }
}

/**
 * The first `expectedBytes` of the file in order, each with its SHA-256: full 1 MiB chunks,
 * then a shorter last one; a single empty chunk for an empty file, as the fixed-size chunker
 * gives. A file that turns out shorter ends early. Each chunk's bytes are a view of a slot
 * taken from `hasher`, valid only until the next chunk is asked for: the consumer must be done
 * with them by then.
 *
 * The next chunk is read and hashed while the consumer hands this one on, into the second
 * slot. The slots go back when the generator ends, however it ends, once no read is left
 * running into them; so the caller must end it (`return()`) before it closes the file. A read
 * that fails ends it with a ChunkReadError.
 */
export async function* largeFileChunks(
  fd: number,
  expectedBytes: number,
  hasher: ChunkHasher,
): AsyncGenerator<HashedChunk> {
  let current = hasher.takeSlot();
  let next = hasher.takeSlot();
  let position = 0;
  let reading: Promise<HashedChunk> | undefined;
  /** Starts reading the next chunk into `next`; what it will give, or nothing past the end. */
  const readNext = (): Promise<HashedChunk> | undefined => {
    const wanted = Math.min(expectedBytes - position, CHUNK_BYTES);
    if (wanted === 0) return undefined;
    const read = hasher.read(fd, position, wanted, next);
    position += wanted;
    // Awaited only once the consumer asks for the chunk, maybe many turns of the event loop
    // later: marked handled now, so that a failed read is not taken for an unhandled rejection
    // (which ends the process) before it is awaited and thrown to the consumer.
    read.catch(() => undefined);
    return read;
  };
  try {
    // An empty file still gives its one empty chunk, hashed as any other.
    reading = expectedBytes === 0 ? hasher.read(fd, 0, 0, next) : readNext();
    for (let first = true; reading; first = false) {
      const chunk = await reading.catch((error: unknown) => {
        // The thread's failure is not the file's: it fails the pack (api/thread-failure.ts).
        throw error instanceof ThreadFailure ? error : new ChunkReadError(error);
      });
      reading = undefined;
      if (chunk.bytes.length === 0 && !first) return;
      [current, next] = [next, current];
      // Only the end of the file makes a chunk short; after it nothing is read ahead.
      if (chunk.bytes.length === CHUNK_BYTES) reading = readNext();
      yield chunk;
      if (chunk.bytes.length < CHUNK_BYTES) return;
    }
  } finally {
    // A read still running writes into `next`: the slot is free only once it is done. Its
    // error, if any, is moot: the consumer stopped before it wanted those bytes.
    if (reading) await reading.catch(() => undefined);
    hasher.giveSlot(current);
    hasher.giveSlot(next);
  }
}
