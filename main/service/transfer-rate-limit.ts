import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { EngineError } from '../api/index.ts';

// A transfer's pace, for a backup that must leave room on a home uplink (`canopy backup
// --limit-upload 2MB`) or a restore on a shared or metered link (`--limit-download`): every
// body the paced client streams out (the shards, the metadata CAR) goes in pieces, and every
// answer it streams in (blocks, metadata) is taken in pieces, each piece only once the bytes
// before it, across all of the client's requests at once, would have taken their time at the
// limit. An answer taken slowly fills the socket's buffers, and TCP then slows the sender. The
// socket and the kernel still buffer what was handed on, so the pace holds over seconds, not
// within one.

/** The smallest limit taken: below it, an upload would outlast any upload window. */
export const MIN_TRANSFER_BYTES_PER_SECOND = 1000;

/** A piece is about a twentieth of a second's bytes, between 16 KiB and 1 MiB. */
const PIECES_PER_SECOND = 20;
const MIN_PIECE_BYTES = 16 << 10;
const MAX_PIECE_BYTES = 1 << 20;

/** Time as the limit reads and waits for it; the real clock unless a test gives its own. */
export interface PaceClock {
  readonly now: () => number;
  readonly wait: (ms: number, signal: AbortSignal) => Promise<void>;
}

const REAL_CLOCK: PaceClock = {
  now: () => performance.now(),
  wait: (ms, signal) => sleep(ms, undefined, { signal }),
};

export class TransferRateLimit {
  /** The bytes each piece holds at most. */
  readonly pieceBytes: number;
  /** When the bytes reserved so far will have gone out at the limit (the clock's ms). */
  private freeAtMs = Number.NEGATIVE_INFINITY;

  constructor(
    readonly bytesPerSecond: number,
    private readonly clock: PaceClock = REAL_CLOCK,
  ) {
    if (!Number.isFinite(bytesPerSecond) || bytesPerSecond < MIN_TRANSFER_BYTES_PER_SECOND)
      throw new EngineError(
        'usage',
        `a transfer limit is at least ${MIN_TRANSFER_BYTES_PER_SECOND} bytes a second`,
      );
    this.pieceBytes = Math.min(
      MAX_PIECE_BYTES,
      Math.max(MIN_PIECE_BYTES, Math.floor(bytesPerSecond / PIECES_PER_SECOND)),
    );
  }

  /**
   * Waits until `bytes` more may go, and counts them as gone. Time spent past the limit's pace
   * (a server slow to take them) is not made up for with a burst: the pace starts again from
   * now.
   */
  async take(bytes: number, signal: AbortSignal): Promise<void> {
    const now = this.clock.now();
    const start = Math.max(now, this.freeAtMs);
    this.freeAtMs = start + (bytes * 1000) / this.bytesPerSecond;
    if (start > now) await this.clock.wait(start - now, signal);
  }

  /** `body`, read no faster than the limit allows, in pieces of at most `pieceBytes`. */
  paced(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
    const reader = body.getReader();
    const cancelled = new AbortController();
    let rest: Uint8Array = new Uint8Array(0);
    return new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          if (rest.length === 0) {
            const read = await reader.read();
            if (read.done) {
              controller.close();
              return;
            }
            rest = read.value;
          }
          const piece = rest.subarray(0, this.pieceBytes);
          rest = rest.subarray(piece.length);
          await this.take(piece.length, cancelled.signal);
          controller.enqueue(piece);
        },
        // A request cut off, or a backup stopped: the wait ends, and the body closes its file.
        cancel: async (reason) => {
          cancelled.abort(reason);
          await reader.cancel(reason);
        },
      },
      { highWaterMark: 0 },
    );
  }

  /**
   * `chunks`, taken no faster than the limit allows, in pieces of at most `pieceBytes`; the
   * wait ends, failing, when `signal` fires.
   */
  async *pacedChunks(
    chunks: AsyncIterable<Uint8Array>,
    signal: AbortSignal = NEVER,
  ): AsyncGenerator<Uint8Array> {
    for await (const chunk of chunks)
      for (let at = 0; at < chunk.length; at += this.pieceBytes) {
        const piece = chunk.subarray(at, at + this.pieceBytes);
        await this.take(piece.length, signal);
        yield piece;
      }
  }
}

/** A signal that never fires. */
const NEVER = new AbortController().signal;
