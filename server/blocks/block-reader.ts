import { closeSync, openSync, read } from 'node:fs';
import type { BlockLocation } from '../store/stored-blocks.ts';
import type { BlockStore } from './block-store.ts';

// A run of block reads (one blocks/car answer, one GET), made through BlockStore.openReader.
// Each pack it reads from stays open until `close`: a restore reads thousands of blocks from
// the same few packs.

/** A block whose file ends before the block does (a pack cut short on its disk). */
export class BlockCutShortError extends Error {
  constructor(
    cid: string,
    /** The file it is in: what the server's operator looks at (problem-log.ts). */
    readonly path: string,
  ) {
    super(`block ${cid} is shorter on disk than recorded, in ${path}`);
    this.name = 'BlockCutShortError';
  }
}

export class BlockReader {
  private readonly fds = new Map<string, number>();
  private closed = false;

  constructor(
    private readonly store: BlockStore,
    private readonly onClose: () => void,
  ) {}

  /**
   * Reads a block into `target` (at least `size` bytes). Only the read goes through the
   * thread pool: each hand-off to the pool cost this thread about 200 µs on the machines we
   * measured, and open and close only microseconds.
   */
  async readInto(location: BlockLocation, target: Buffer): Promise<void> {
    const { file, offset } = this.store.fileOf(location);
    const shared = location.pack !== null;
    const fd = (shared ? this.fds.get(file) : undefined) ?? this.open(location, file);
    if (shared) this.fds.set(file, fd);
    try {
      let filled = 0;
      while (filled < location.size) {
        const got = await new Promise<number>((resolve, reject) => {
          read(fd, target, filled, location.size - filled, offset + filled, (error, bytesRead) =>
            // A failed read names no file, unlike a failed open: the file is what the server's
            // operator checks, so it is named here.
            error ? reject(Object.assign(error, { path: error.path ?? file })) : resolve(bytesRead),
          );
        });
        if (got === 0) throw new BlockCutShortError(location.cid, file);
        filled += got;
      }
    } finally {
      if (!shared) closeSync(fd);
    }
  }

  /**
   * Opens the file a block is in. A pack gone from its place since the block was looked up is
   * read where it was retired to: another process serving this folder (a command in another
   * terminal) compacted or freed it meanwhile, and it keeps it there until it next copies the
   * database. (This process's own retirements wait for its readers: BlockStore.openReader.)
   */
  private open(location: BlockLocation, file: string): number {
    try {
      return openSync(file, 'r');
    } catch (error) {
      if (location.pack === null || (error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      try {
        return openSync(this.store.retiredPackPath(location.pack), 'r');
      } catch (retiredError) {
        // Gone from both: the pack's own place is the one to name.
        if ((retiredError as NodeJS.ErrnoException).code === 'ENOENT') throw error;
        throw retiredError;
      }
    }
  }

  async read(location: BlockLocation): Promise<Buffer> {
    const bytes = Buffer.allocUnsafeSlow(location.size);
    await this.readInto(location, bytes);
    return bytes;
  }

  /**
   * Closes every pack it opened, and tells the store it is done, even when a close fails: the
   * descriptor is released all the same (close(2) on Linux), and a store that still counted
   * this reader would never compact its packs. The first failure (a disk pulled out) is thrown
   * after.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    let failure: { readonly error: unknown } | undefined;
    try {
      for (const fd of this.fds.values()) {
        try {
          closeSync(fd);
        } catch (error) {
          failure ??= { error };
        }
      }
      this.fds.clear();
    } finally {
      this.onClose();
    }
    if (failure) throw failure.error;
  }
}
