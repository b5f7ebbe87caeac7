import type { ServerResponse } from 'node:http';
import {
  encodeCarHeader,
  encodeCarSectionHead,
  type ProtocolCid,
} from '../../main/protocol/index.ts';
import type { BlockLocation } from '../store/stored-blocks.ts';
import type { BlockStore } from './block-store.ts';
import { ReadBuffers } from './read-buffers.ts';

// The body of a blocks/car answer (§11.5), written straight to the socket from the block
// store. Blocks that lie next to each other in one pack, in the order asked for, are read in
// one call (a run): a restore of small files asks for them in the order they were backed up,
// so hundreds of them come in one read instead of one each, and each read cost this thread
// about 50 µs however small. Reads run a few runs ahead, in order: one at a time, the answer
// would wait on each read in turn. Every read lands in a buffer that goes back to the pool
// once the socket has taken its bytes.

export interface CarAnswerBlock {
  readonly cid: ProtocolCid;
  readonly location: BlockLocation;
}

const MiB = 1 << 20;
/**
 * Reads in flight for one answer, bounded by count (small blocks in files of their own: hide
 * each file's open and close) and by bytes (large blocks: more reads at once only compete for
 * the CPU with the socket). Four 1 MiB reads ahead measured fastest on 2 cores: about 8 % over
 * two from a cold disk, the same from the page cache, and no better with eight.
 */
const READ_AHEAD_RUNS = 16;
const READ_AHEAD_BYTES = 4 * MiB;
/** A run of adjacent blocks is read whole up to this size: one chunk, a pooled buffer. */
const RUN_BYTES = MiB;
/** Shared by all answers: a few answers' worth of 1 MiB reads ahead of their sockets. */
const readBuffers = new ReadBuffers(MiB, 8);

export interface CarAnswer {
  /** Exact byte length, known before the first byte because every block's size is recorded. */
  readonly length: number;
  /** Writes the whole CAR and ends the response; resolves early if the client hangs up. */
  write(response: ServerResponse): Promise<void>;
}

/** Blocks `start` to `end` (exclusive) of an answer, read from disk in one call. */
interface Run {
  readonly start: number;
  readonly end: number;
  /** One location spanning the run's blocks. */
  readonly location: BlockLocation;
}

/** The answer's blocks, in order, grouped into runs of blocks adjacent in one pack. */
function runsOf(blocks: readonly CarAnswerBlock[]): Run[] {
  const runs: Run[] = [];
  let start = 0;
  while (start < blocks.length) {
    const first = (blocks[start] as CarAnswerBlock).location;
    let end = start + 1;
    let size = first.size;
    // Only blocks in packs: a block file of its own (an earlier server's) holds one block.
    while (first.pack !== null && end < blocks.length) {
      const next = (blocks[end] as CarAnswerBlock).location;
      if (next.pack !== first.pack || next.offset !== first.offset + size) break;
      if (size + next.size > RUN_BYTES) break;
      size += next.size;
      end += 1;
    }
    runs.push({ start, end, location: { ...first, size } });
    start = end;
  }
  return runs;
}

/** What an answer tells of the failures it cannot report in the answer itself. */
export interface CarAnswerFailures {
  /**
   * The blocks of a read that failed, and why, before the answer is cut short: its headers are
   * out, so the answer cannot say so (unreadable-blocks.ts).
   */
  readonly onReadFailed: (cids: readonly string[], error: unknown) => void;
  /**
   * A pack that would not close once the answer was written or cut short (its disk pulled
   * out): nothing waits for that close, so nothing else could report it.
   */
  readonly onCloseFailed: (error: unknown) => void;
}

/** The answer of a blocks/car request for `blocks`. */
export function carAnswer(
  store: BlockStore,
  root: ProtocolCid,
  blocks: readonly CarAnswerBlock[],
  { onReadFailed, onCloseFailed }: CarAnswerFailures,
): CarAnswer {
  const header = encodeCarHeader([root]);
  const heads = blocks.map((block) => encodeCarSectionHead(block.cid, block.location.size));
  let length = header.length;
  for (const [index, block] of blocks.entries())
    length += (heads[index]?.length ?? 0) + block.location.size;

  async function write(response: ServerResponse): Promise<void> {
    const runs = runsOf(blocks);
    const reader = store.openReader();
    const ahead: Array<Promise<Buffer>> = [];
    let next = 0;
    let aheadBytes = 0;
    const readNext = (): void => {
      const run = runs[next];
      next += 1;
      if (!run) return;
      aheadBytes += run.location.size;
      const buffer = readBuffers.take(run.location.size);
      const reading = reader.readInto(run.location, buffer).then(
        () => buffer,
        (error: unknown) => {
          readBuffers.give(buffer);
          throw error;
        },
      );
      // Handled where it is awaited; this keeps a read that fails while an earlier one is
      // still awaited from counting as unhandled.
      reading.catch(() => undefined);
      ahead.push(reading);
    };
    try {
      response.write(header);
      for (const run of runs) {
        while (
          next < runs.length &&
          (ahead.length === 0 || (ahead.length < READ_AHEAD_RUNS && aheadBytes < READ_AHEAD_BYTES))
        )
          readNext();
        let buffer: Buffer;
        try {
          buffer = await (ahead.shift() as Promise<Buffer>);
        } catch (error) {
          onReadFailed(
            blocks.slice(run.start, run.end).map((block) => block.location.cid),
            error,
          );
          throw error;
        }
        aheadBytes -= run.location.size;
        if (response.destroyed) {
          readBuffers.give(buffer);
          return;
        }
        response.cork();
        let fits = true;
        for (let index = run.start, at = 0; index < run.end; index += 1) {
          const size = (blocks[index] as CarAnswerBlock).location.size;
          response.write(heads[index] ?? new Uint8Array(0));
          // The buffer goes back once the socket has taken the run's last block.
          const done = index === run.end - 1 ? () => readBuffers.give(buffer) : undefined;
          fits = response.write(buffer.subarray(at, at + size), done);
          at += size;
        }
        response.uncork();
        if (!fits) await drainedOrClosed(response);
      }
      response.end();
    } finally {
      // Reads still in flight after a hang-up or a failed read: take their buffers back, and
      // close the reader once none of them needs its files any more.
      const left = ahead.map((reading) =>
        reading.then(
          (buffer) => readBuffers.give(buffer),
          () => undefined,
        ),
      );
      void Promise.all(left)
        .then(() => reader.close())
        .catch(onCloseFailed);
    }
  }

  return { length, write };
}

function drainedOrClosed(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.on('drain', done);
    response.on('close', done);
  });
}
