import { closeSync, constants, openSync } from 'node:fs';
import { DirectWriter, openDirect, type AlignedSlots } from '../direct-io/index.ts';
import { writeFully, writeFullySync } from './file-writes.ts';

// Where a restored file's bytes go: a new temporary file, written with O_DIRECT from an aligned
// slot when the file is large, a slot is free and the file system takes it (direct-writer.ts),
// else through the page cache. A small file costs the page cache little, and would need its
// one block padded and cut back. Restores of the bench set took 5.6-6.2 s this way against
// 6.9-8.3 s through the page cache (five alternating pairs), with half the system time.

/** Files from this size on are written with O_DIRECT where they can be. */
export const DIRECT_FROM_BYTES = 256 * 1024;
/**
 * Files up to this size are written on the engine's thread, not through the thread pool: a
 * copy of a few kilobytes into the page cache costs less than the hand-off. Cold restores of
 * the bench set (10 000 files of 1 KiB among its 11 000) took 5.1-5.7 s this way against
 * 5.6-6.1 s in four alternating pairs (each faster), and 5.3-6.3 s against 5.9-6.3 s in six
 * more (five faster).
 */
const SYNC_WRITE_UP_TO = 64 * 1024;

export interface FileOutput {
  /** The file's descriptor, for its mode, times and fsync once `finish` is done. */
  readonly fd: number;
  /** Writes `pieces` in order; resolves with their byte count. */
  write(pieces: readonly Uint8Array[]): Promise<number>;
  /** Writes anything held back: after it, the file has all its bytes. */
  finish(): Promise<void>;
  /** Closes the file and hands back its slot. Once only, whatever happened before. */
  close(): void;
}

function bufferedOutput(file: string, mode: number, size: number): FileOutput {
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  return {
    fd,
    write: (pieces) =>
      size <= SYNC_WRITE_UP_TO
        ? // A failed write rejects, as the thread pool's would, rather than throw.
          new Promise((resolve) => resolve(writeFullySync(fd, pieces)))
        : writeFully(fd, pieces),
    finish: () => Promise.resolve(),
    close: () => closeSync(fd),
  };
}

/**
 * Creates `file` (a temporary name no file has: O_EXCL) with `mode` for a file of `size`
 * bytes. Errors of creating it are thrown as they came.
 */
export function openFileOutput(
  file: string,
  mode: number,
  size: number,
  slots: AlignedSlots | undefined,
): FileOutput {
  const slot = size >= DIRECT_FROM_BYTES ? slots?.take() : undefined;
  if (!slot) return bufferedOutput(file, mode, size);
  let fd: number | undefined;
  try {
    fd = openDirect(file, mode);
  } finally {
    if (fd === undefined) slots?.give(slot);
  }
  if (fd === undefined) return bufferedOutput(file, mode, size);
  const writer = new DirectWriter(fd, file, slot);
  return {
    get fd() {
      return writer.fd;
    },
    write: (pieces) => writer.write(pieces),
    finish: () => writer.finish(),
    close: () => {
      slots?.give(slot);
      closeSync(writer.fd);
    },
  };
}
