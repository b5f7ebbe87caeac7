import { fsync, writev, writevSync } from 'node:fs';
import { piecesAfter } from '../protocol/index.ts';

// The two steps of writing a restored file that move data and so belong in the thread pool.
// Everything else about a file (open, close, chmod, utimes, rename) is a metadata call of a few
// microseconds, made synchronously: through the thread pool each one cost about 200 µs of this
// thread's time on the machines we measured, more than the call itself. So does the write of a
// small file's few kilobytes into the page cache (file-output.ts): writeFullySync.

/**
 * Writes all of `pieces`, in order, at `position` of the file: in one call, unless the disk
 * takes only part of them (then the rest goes in the next).
 */
export async function writeFully(
  fd: number,
  pieces: readonly Uint8Array[],
  position: number,
): Promise<number> {
  let left = pieces;
  let total = 0;
  while (left.length > 0) {
    const written = await new Promise<number>((resolve, reject) => {
      writev(fd, left, position + total, (error, count) =>
        error ? reject(error) : resolve(count),
      );
    });
    total += written;
    left = piecesAfter(left, written);
  }
  return total;
}

export function fsyncFully(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fsync(fd, (error) => (error ? reject(error) : resolve()));
  });
}

/** writeFully, made on this thread: for a few kilobytes, less than a hand-off to the pool. */
export function writeFullySync(
  fd: number,
  pieces: readonly Uint8Array[],
  position: number,
): number {
  let left = pieces;
  let total = 0;
  while (left.length > 0) {
    const written = writevSync(fd, left, position + total);
    total += written;
    left = piecesAfter(left, written);
  }
  return total;
}
