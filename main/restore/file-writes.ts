import { fsync, write } from 'node:fs';

// The two steps of writing a restored file that move data and so belong in the thread pool.
// Everything else about a file (open, close, chmod, utimes, rename) is a metadata call of a few
// microseconds, made synchronously: through the thread pool each one cost about 200 µs of this
// thread's time on the machines we measured, more than the call itself.

/** Writes all of `bytes` at the descriptor's position. */
export async function writeFully(fd: number, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    offset += await new Promise<number>((resolve, reject) => {
      write(fd, bytes, offset, bytes.length - offset, null, (error, written) =>
        error ? reject(error) : resolve(written),
      );
    });
  }
}

export function fsyncFully(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fsync(fd, (error) => (error ? reject(error) : resolve()));
  });
}
