// Buffers for reading blocks into, handed back once the socket has taken their bytes. A
// blocks/car answer reads hundreds of megabytes; a fresh buffer per block made the garbage
// collector the largest single cost of serving it.

export class ReadBuffers {
  private readonly free: Buffer[] = [];

  constructor(
    /** Size of every pooled buffer: the common block size (one 1 MiB chunk). */
    private readonly bufferBytes: number,
    /** Buffers kept for reuse; more in use at once are allocated and left to the collector. */
    private readonly keep: number,
  ) {}

  /** A buffer of at least `size` bytes; only blocks near the pooled size use a pooled one. */
  take(size: number): Buffer {
    // A small block in a pooled buffer would pin a whole one for a few bytes: many small
    // blocks ahead of the socket then held a megabyte each.
    if (size > this.bufferBytes || size <= this.bufferBytes / 2)
      return Buffer.allocUnsafeSlow(size);
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.bufferBytes);
  }

  /** Returns a buffer from `take` once nothing refers to its bytes any more. */
  give(buffer: Buffer): void {
    if (buffer.length === this.bufferBytes && this.free.length < this.keep) this.free.push(buffer);
  }
}
