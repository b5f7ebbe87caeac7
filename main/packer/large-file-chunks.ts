import type { FileHandle } from 'node:fs/promises';
import { CHUNK_BYTES } from './unixfs-settings.ts';

// Reading a file in 1 MiB chunks, each read into the same buffer. A fresh buffer per chunk is
// garbage outside the JS heap, and V8 collects that only after about 64 MB of it has piled
// up: on a 4 GiB backup it was a fifth of the process's peak memory. The buffers come from a
// pool shared by the files read at the same time (the packer reads a few at once), so a
// backup holds a handful of them, however many files and bytes it reads.

/** The 1 MiB buffers of the files not being read, ready for the next one. */
export class ChunkBuffers {
  private readonly free: Buffer[] = [];

  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(CHUNK_BYTES);
  }

  give(buffer: Buffer): void {
    this.free.push(buffer);
  }
}

/** Reads from the handle's position until `buffer` is full or the file ends; returns the count. */
async function fillChunk(handle: FileHandle, buffer: Buffer): Promise<number> {
  let length = 0;
  while (length < buffer.length) {
    const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
    if (bytesRead === 0) break;
    length += bytesRead;
  }
  return length;
}

/**
 * The file's chunks in order: full 1 MiB chunks, then a shorter last one; a single empty chunk
 * for an empty file, as the fixed-size chunker gives. Each chunk is a view of one buffer taken
 * from `buffers`, so it is valid only until the next chunk is asked for: the consumer must be
 * done with it by then. The buffer goes back when the generator ends, however it ends.
 */
export async function* largeFileChunks(
  handle: FileHandle,
  buffers: ChunkBuffers,
): AsyncGenerator<Uint8Array> {
  const buffer = buffers.take();
  try {
    for (let first = true; ; first = false) {
      const length = await fillChunk(handle, buffer);
      if (length === 0 && !first) return;
      yield buffer.subarray(0, length);
      // Only the end of the file makes a chunk short.
      if (length < buffer.length) return;
    }
  } finally {
    buffers.give(buffer);
  }
}
