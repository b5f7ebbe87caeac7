import { closeSync, constants, ftruncateSync, openSync } from 'node:fs';
import { DirectWriter, openDirect, type AlignedSlots } from '../direct-io/index.ts';
import { mismatchedBlock, UncheckedCarBlock } from '../protocol/index.ts';
import { Hole, type FilePart, type LeafPart } from './file-bytes.ts';
import { writeFully, writeFullySync } from './file-writes.ts';

// Where a restored file's bytes go: a new temporary file, written with O_DIRECT from an aligned
// slot when the file is large, a slot is free and the file system takes it (direct-writer.ts),
// else through the page cache. A small file costs the page cache little, and would need its
// one block padded and cut back. Restores of the bench set took 5.6-6.2 s this way against
// 6.9-8.3 s through the page cache (five alternating pairs), with half the system time.
//
// A leaf not yet checked against its CID is checked here, before anything after it is written:
// a large file's leaf by hashing its copy in the slot on a worker while the slot is written out
// (aligned-slots.ts), anything else on this thread before it is written. A leaf that does not
// match rejects with readCar's CarFormatError; the file is then not restored, and whatever of
// the leaf reached its temporary file goes with it.

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
  /** Writes `part` after what came before; resolves with its byte count. */
  write(part: FilePart): Promise<number>;
  /** Writes anything held back: after it, the file has all its bytes. */
  finish(): Promise<void>;
  /** Closes the file and hands back its slot. Once only, whatever happened before. */
  close(): void;
}

/** The part's pieces, once they are known to be the leaf's (hashed here if need be). */
function checkedPieces(part: LeafPart): readonly Uint8Array[] {
  return part instanceof UncheckedCarBlock ? part.check().pieces : part;
}

function bufferedOutput(file: string, mode: number, size: number): FileOutput {
  return bufferedOutputOn(
    openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode),
    size,
  );
}

/** Writes through the page cache into `fd`, from its start, for a file of `size` bytes. */
function bufferedOutputOn(fd: number, size: number): FileOutput {
  /** Where the next part goes: past the holes left, which no write moves over. */
  let position = 0;
  let endsInHole = false;
  const written = (count: number): number => {
    position += count;
    return count;
  };
  return {
    fd,
    write: (part) => {
      endsInHole = part instanceof Hole;
      if (part instanceof Hole) return Promise.resolve(written(part.length));
      // A failed check or write rejects, as the thread pool's would, rather than throw.
      return size <= SYNC_WRITE_UP_TO
        ? new Promise<number>((resolve) =>
            resolve(writeFullySync(fd, checkedPieces(part), position)),
          ).then(written)
        : new Promise<readonly Uint8Array[]>((resolve) => resolve(checkedPieces(part)))
            .then((pieces) => writeFully(fd, pieces, position))
            .then(written);
    },
    // A hole at the end is the file's length, which no write gave it.
    finish: () => {
      if (endsInHole) ftruncateSync(fd, position);
      return Promise.resolve();
    },
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
  if (!slots || !slot) return bufferedOutput(file, mode, size);
  let fd: number | undefined;
  try {
    fd = openDirect(file, mode);
  } finally {
    if (fd === undefined) slots.give(slot);
  }
  if (fd === undefined) return bufferedOutput(file, mode, size);
  const writer = new DirectWriter(fd, file, slot);
  /** Whether the worker's digest of a leaf's copy is the one its CID names; rejects if not. */
  const checkCopy = async (leaf: UncheckedCarBlock, copy: Uint8Array): Promise<void> => {
    const digest = await slots.digestOf(copy);
    if (!Buffer.from(digest).equals(leaf.expectedDigest)) throw mismatchedBlock(leaf.cid);
  };
  return {
    get fd() {
      return writer.fd;
    },
    write: async (part) => {
      if (part instanceof Hole) {
        if (await writer.skip(part.length)) return part.length;
        // Not at a whole block (a layout other than the spec's): its zeros are written.
        return writer.write([new Uint8Array(part.length)]);
      }
      if (!(part instanceof UncheckedCarBlock)) return writer.write(part);
      // A leaf that would not fit in what is left of the slot is hashed here: with the spec's
      // 1 MiB leaves, only a file whose layout differs.
      if (part.length > writer.room) return writer.write(part.check().pieces);
      return writer.writeAlongside(part.pieces, (copy) => checkCopy(part, copy));
    },
    finish: () => writer.finish(),
    close: () => {
      slots.give(slot);
      closeSync(writer.fd);
    },
  };
}

/**
 * Opens the part-written `file` (part-files.ts) of a file of `size` bytes to go on writing it: cut back to its first
 * `keptBytes`, the leaves it holds whole. Those come as holes (a Hole of each leaf's size),
 * which move past them without writing; the rest is written after them. Through the page cache,
 * where a hole written over is never filled with zeros, as O_DIRECT may fill one not at a whole
 * block. Errors of opening it are thrown as they came.
 */
export function openPartFileOutput(file: string, size: number, keptBytes: number): FileOutput {
  // Not through a link put in its place since: into whatever it points at.
  const fd = openSync(file, constants.O_WRONLY | constants.O_NOFOLLOW);
  try {
    ftruncateSync(fd, keptBytes);
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return bufferedOutputOn(fd, size);
}
