import { read } from 'node:fs';
import { CHUNK_BYTES } from './unixfs-settings.ts';

// Reading a file in 1 MiB chunks, into the same two buffers in turn. A fresh buffer per chunk is
// garbage outside the JS heap, and V8 collects that only after about 64 MB of it has piled
// up: on a 4 GiB backup it was a fifth of the process's peak memory. The buffers come from a
// pool shared by the files read at the same time (the packer reads a few at once), so a
// backup holds a handful of them, however many files and bytes it reads.
//
// Only the reads go through the thread pool, and only as many as the bytes the scan saw: each
// round trip there costs this thread about 150 µs on the machines we measured, and an extra
// read to find the end of the file, plus an asynchronous open, stat and close, made 1 MiB
// files pack at half the speed of hashing them. A file that grew meanwhile is the caller's to
// notice, by its size after the read.

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

function readAt(fd: number, buffer: Buffer, offset: number, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    read(fd, buffer, offset, length, null, (error, bytesRead) =>
      error ? reject(error) : resolve(bytesRead),
    );
  });
}

/** Reads from the descriptor's position until `length` bytes or the file's end; the count. */
async function fillChunk(fd: number, buffer: Buffer, length: number): Promise<number> {
  let filled = 0;
  while (filled < length) {
    const count = await readAt(fd, buffer, filled, length - filled);
    if (count === 0) break;
    filled += count;
  }
  return filled;
}

/**
 * The first `expectedBytes` of the file in order: full 1 MiB chunks, then a shorter last one;
 * a single empty chunk for an empty file, as the fixed-size chunker gives. A file that turns
 * out shorter ends early. Each chunk is a view of a buffer taken from `buffers`, valid only
 * until the next chunk is asked for: the consumer must be done with it by then.
 *
 * The next chunk is read while the consumer hashes this one, into a second buffer: one after
 * the other, a 100 MiB file kept the thread pool and the hashing waiting on each other. The
 * buffers go back when the generator ends, however it ends, once no read is left running into
 * them; so the caller must end it (`return()`) before it closes the file.
 */
export async function* largeFileChunks(
  fd: number,
  expectedBytes: number,
  buffers: ChunkBuffers,
): AsyncGenerator<Uint8Array> {
  let current = buffers.take();
  let next = buffers.take();
  let left = expectedBytes;
  let reading: Promise<number> | undefined;
  /** Starts reading the next chunk into `next`; what it will give, or nothing past the end. */
  const readNext = (): Promise<number> | undefined => {
    const wanted = Math.min(left, next.length);
    if (wanted === 0) return undefined;
    left -= wanted;
    const read = fillChunk(fd, next, wanted);
    // Awaited only once the consumer asks for the chunk, maybe many turns of the event loop
    // later: marked handled now, so that a failed read is not taken for an unhandled rejection
    // (which ends the process) before it is awaited and thrown to the consumer.
    read.catch(() => undefined);
    return read;
  };
  try {
    reading = expectedBytes === 0 ? Promise.resolve(0) : readNext();
    for (let first = true; reading; first = false) {
      const length = await reading;
      reading = undefined;
      if (length === 0 && !first) return;
      [current, next] = [next, current];
      // Only the end of the file makes a chunk short; after it nothing is read ahead.
      if (length === current.length) reading = readNext();
      yield current.subarray(0, length);
      if (length < current.length) return;
    }
  } finally {
    // A read still running writes into `next`: the buffer is free only once it is done. Its
    // error, if any, is moot: the consumer stopped before it wanted those bytes.
    if (reading) await reading.catch(() => 0);
    buffers.give(current);
    buffers.give(next);
  }
}
