import { randomUUID } from 'node:crypto';
import { close, fdatasync, open, rmSync, writev } from 'node:fs';
import path from 'node:path';
import { piecesAfter } from '../../main/protocol/index.ts';

// One pack file being written in the staging folder. Blocks are appended in order, each at an
// offset known as soon as it is appended, and written in batches of about a megabyte: a shard
// of small files is thousands of blocks, and one write call each cost more than the bytes.
// `finish` makes the file durable; the store then renames it into place (BlockStore.commitPack).

const BATCH_BYTES = 1 << 20;
/** Batches written at once: the thread pool overlaps them with reading the next blocks. */
const WRITES_IN_FLIGHT = 4;

export class PackWriter {
  readonly id = randomUUID();
  /** Bytes appended so far: the pack's length once finished. */
  length = 0;
  private batch: Uint8Array[] = [];
  private batchBytes = 0;
  private batchOffset = 0;
  private readonly writes = new Set<Promise<void>>();
  private failure: Error | undefined;
  private closed = false;

  private constructor(
    readonly file: string,
    private readonly fd: number,
  ) {}

  static async create(stagingDir: string): Promise<PackWriter> {
    const writer = path.join(stagingDir, `${randomUUID()}.pack`);
    const fd = await new Promise<number>((resolve, reject) => {
      open(writer, 'wx', 0o600, (error, opened) => (error ? reject(error) : resolve(opened)));
    });
    return new PackWriter(writer, fd);
  }

  /**
   * Appends a block, in one piece or in the pieces it arrived in, and returns its offset. The
   * bytes are written later, so the caller must not change them; call `ready` before appending
   * more, so writes cannot pile up in memory.
   */
  append(...pieces: Uint8Array[]): number {
    const offset = this.length;
    for (const piece of pieces) {
      this.batch.push(piece);
      this.batchBytes += piece.length;
      this.length += piece.length;
    }
    if (this.batchBytes >= BATCH_BYTES) this.flush();
    return offset;
  }

  /** Resolves once there is room for another batch; rejects with the first failed write. */
  async ready(): Promise<void> {
    while (this.writes.size >= WRITES_IN_FLIGHT) await Promise.race(this.writes);
    if (this.failure) throw this.failure;
  }

  /** Writes what is left, fdatasyncs and closes the file. */
  async finish(): Promise<void> {
    this.flush();
    await Promise.all(this.writes);
    if (this.failure) throw this.failure;
    await new Promise<void>((resolve, reject) => {
      fdatasync(this.fd, (error) => (error ? reject(error) : resolve()));
    });
    await this.close();
  }

  /** Waits for writes in flight, closes and removes the staged file. */
  async discard(): Promise<void> {
    await Promise.allSettled(this.writes);
    try {
      await this.close();
    } finally {
      rmSync(this.file, { force: true });
    }
  }

  private flush(): void {
    if (this.batchBytes === 0) return;
    const parts = this.batch;
    const position = this.batchOffset;
    this.batchOffset += this.batchBytes;
    this.batch = [];
    this.batchBytes = 0;
    const write = this.writeAll(parts, position).catch((error: unknown) => {
      this.failure ??= error instanceof Error ? error : new Error(String(error));
    });
    this.writes.add(write);
    void write.finally(() => this.writes.delete(write));
  }

  private async writeAll(parts: Uint8Array[], position: number): Promise<void> {
    let pending = parts;
    let at = position;
    while (pending.length > 0) {
      const written = await new Promise<number>((resolve, reject) => {
        writev(this.fd, pending, at, (error, count) => (error ? reject(error) : resolve(count)));
      });
      at += written;
      pending = piecesAfter(pending, written);
    }
  }

  private async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await new Promise<void>((resolve, reject) => {
      close(this.fd, (error) => (error ? reject(error) : resolve()));
    });
  }
}
