import { closeSync, constants, ftruncateSync, openSync, rmSync, write } from 'node:fs';
import { DIRECT_ALIGN } from './aligned-slots.ts';

// A file written with O_DIRECT: its bytes go from an aligned slot (aligned-slots.ts) to the
// disk without a copy into the page cache. Through the page cache, writing cost the kernel
// about 2 ms of CPU time per MiB on the machines we measured (a single thread writing the
// bench's tree used 3.1-4.0 s of system time against 1.9 s with O_DIRECT), on two cores the
// same CPU time the backup's or restore's own work needs. A restore or backup of many gigabytes
// also no longer pushes the user's other files out of the cache; what it wrote is read from the
// disk when it is next read.
//
// O_DIRECT takes only whole aligned blocks at aligned offsets. Bytes are copied into the slot
// and written out a full slot at a time, and the last partial block goes out padded with zeros
// before the file is cut to its length. The file must still be fsynced as any other: O_DIRECT
// leaves the data in the disk's own cache and the file's size unwritten.
//
// Not every file system takes O_DIRECT: ramfs (and tmpfs before Linux 6.6) refuses it when the
// file is opened, and a disk with blocks larger than 4096 bytes would refuse the writes. Either
// way (EINVAL) the file goes on through the page cache, from where it got to.

/** The offset just past `length` bytes, rounded up to a whole block. */
function alignedUp(length: number): number {
  return Math.ceil(length / DIRECT_ALIGN) * DIRECT_ALIGN;
}

function writeAt(fd: number, bytes: Uint8Array, position: number): Promise<number> {
  return new Promise((resolve, reject) => {
    write(fd, bytes, 0, bytes.length, position, (error, written) =>
      error ? reject(error) : resolve(written),
    );
  });
}

async function writeAllAt(fd: number, bytes: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < bytes.length) done += await writeAt(fd, bytes.subarray(done), position + done);
}

function isRefused(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'EINVAL';
}

/**
 * Creates `file` (a name nothing has: O_CREAT | O_EXCL) for O_DIRECT writes, or returns
 * undefined, with no file made, when its file system does not take O_DIRECT. Other errors are
 * thrown as they came.
 */
export function openDirect(file: string, mode: number): number | undefined {
  if (constants.O_DIRECT === undefined) return undefined;
  try {
    return openSync(
      file,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_DIRECT,
      mode,
    );
  } catch (error) {
    if (!isRefused(error)) throw error;
    // Some (ramfs) make the file before they refuse the flag. O_EXCL says it was not there
    // before, so it is this call's, and goes: the caller makes it again.
    rmSync(file, { force: true });
    return undefined;
  }
}

export class DirectWriter {
  /** Bytes copied into the slot and not yet written. */
  private filled = 0;
  /** The file offset of the slot's first byte. */
  private position = 0;
  /** Set once the file system refused a direct write: the rest goes through the page cache. */
  private buffered = false;
  /** Whether the last bytes taken were a hole (skip), with nothing written after it. */
  private endsInHole = false;
  private descriptor: number;

  constructor(
    /** Opened by openDirect. */
    fd: number,
    /** The file's own path, to open it again without O_DIRECT if a write is refused. */
    private readonly file: string,
    private readonly slot: Uint8Array,
  ) {
    this.descriptor = fd;
  }

  /** The file's descriptor: for its mode, times, fsync and close once `finish` is done. */
  get fd(): number {
    return this.descriptor;
  }

  /** Takes `pieces` in order; resolves with their byte count once the slot can take more. */
  async write(pieces: readonly Uint8Array[]): Promise<number> {
    this.endsInHole = false;
    let total = 0;
    for (const piece of pieces) {
      for (let at = 0; at < piece.length;) {
        const take = Math.min(piece.length - at, this.slot.length - this.filled);
        this.slot.set(piece.subarray(at, at + take), this.filled);
        this.filled += take;
        at += take;
        if (this.filled === this.slot.length) await this.writeOut(this.filled);
      }
      total += piece.length;
    }
    return total;
  }

  /** Bytes the slot takes before it is written out. */
  get room(): number {
    return this.slot.length - this.filled;
  }

  /**
   * Copies `pieces`, at most `room` bytes in all, into the slot as one run, and runs `alongside`
   * on that copy while the slot is written out (if they filled it). Resolves with their byte
   * count once both are done, so the copy stays as it is until `alongside` settles; rejects with
   * the first failure of either. A restore hashes a leaf's copy so, as it writes it.
   */
  async writeAlongside(
    pieces: readonly Uint8Array[],
    alongside: (copy: Uint8Array) => Promise<void>,
  ): Promise<number> {
    this.endsInHole = false;
    let total = 0;
    for (const piece of pieces) total += piece.length;
    if (total > this.room) throw new RangeError(`${total} bytes do not fit in the slot`);
    const start = this.filled;
    for (const piece of pieces) {
      this.slot.set(piece, this.filled);
      this.filled += piece.length;
    }
    const [done, written] = await Promise.allSettled([
      alongside(this.slot.subarray(start, this.filled)),
      this.filled === this.slot.length ? this.writeOut(this.filled) : undefined,
    ]);
    if (done.status === 'rejected') throw done.reason;
    if (written.status === 'rejected') throw written.reason;
    return total;
  }

  /**
   * Leaves the next `length` bytes of the file a hole, after writing what the slot holds:
   * false, and nothing done, unless that and `length` are whole blocks (O_DIRECT writes only
   * those at whole-block offsets).
   */
  async skip(length: number): Promise<boolean> {
    if (this.filled % DIRECT_ALIGN !== 0 || length % DIRECT_ALIGN !== 0) return false;
    if (this.filled > 0) await this.writeOut(this.filled);
    this.position += length;
    this.endsInHole = true;
    return true;
  }

  /** Writes what is left and leaves the file at its length. */
  async finish(): Promise<void> {
    // A hole at the end is the file's length, which no write gave it.
    if (this.filled === 0) {
      if (this.endsInHole) ftruncateSync(this.descriptor, this.position);
      return;
    }
    const length = this.position + this.filled;
    if (this.buffered) {
      await this.writeOut(this.filled);
      return;
    }
    // The last block whole, its tail zeros, then cut back: the zeros never show.
    const padded = alignedUp(this.filled);
    this.slot.fill(0, this.filled, padded);
    await this.writeOut(padded);
    ftruncateSync(this.descriptor, length);
  }

  /**
   * Writes the slot's first `count` bytes (whole blocks, or the padded last one) at `position`,
   * and moves what is left of the slot to its front.
   */
  private async writeOut(count: number): Promise<void> {
    const bytes = this.slot.subarray(0, count);
    try {
      await writeAllAt(this.descriptor, bytes, this.position);
    } catch (error) {
      if (this.buffered || !isRefused(error)) throw error;
      this.reopenBuffered();
      await writeAllAt(this.descriptor, bytes, this.position);
    }
    const kept = Math.max(0, this.filled - count);
    this.slot.copyWithin(0, count, count + kept);
    this.position += count;
    this.filled = kept;
  }

  private reopenBuffered(): void {
    const fd = openSync(this.file, constants.O_WRONLY);
    closeSync(this.descriptor);
    this.descriptor = fd;
    this.buffered = true;
  }
}
