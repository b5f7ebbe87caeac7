import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import { TransferRateLimit, type PaceClock } from '../../../main/service/index.ts';

// `--limit-upload`: a body goes out no faster than the limit, across all the bodies sharing it,
// byte for byte as given. Time here is a test clock that moves only when the limit waits, so
// the pace is counted exactly, never measured.

/** A clock that moves only when waited on; each wait is noted. */
function testClock(): PaceClock & { ms: number; waits: number[] } {
  const clock = {
    ms: 0,
    waits: [] as number[],
    now: () => clock.ms,
    wait: async (ms: number, signal: AbortSignal) => {
      signal.throwIfAborted();
      clock.waits.push(ms);
      clock.ms += ms;
      await Promise.resolve();
    },
  };
  return clock;
}

function streamOf(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    pull(controller) {
      const chunk = chunks.shift();
      if (chunk) controller.enqueue(chunk);
      else controller.close();
    },
  });
}

/** Reads `stream` whole, noting the clock as each piece is handed on. */
async function readPaced(
  stream: ReadableStream<Uint8Array>,
  clock: { ms: number },
): Promise<{ bytes: Buffer; pieces: { at: number; length: number }[] }> {
  const parts: Uint8Array[] = [];
  const pieces: { at: number; length: number }[] = [];
  for await (const part of stream) {
    parts.push(part);
    pieces.push({ at: clock.ms, length: part.length });
  }
  return { bytes: Buffer.concat(parts), pieces };
}

describe('TransferRateLimit', () => {
  it('hands a body on byte for byte, each piece once those before it took their time', async () => {
    const clock = testClock();
    const limit = new TransferRateLimit(1_000_000, clock);
    expect(limit.pieceBytes).toBe(50_000);
    const chunks = [randomBytes(1 << 20), randomBytes(123), randomBytes(300_001)];
    const { bytes, pieces } = await readPaced(limit.paced(streamOf(...chunks)), clock);
    expect(bytes.equals(Buffer.concat(chunks))).toBe(true);
    expect(Math.max(...pieces.map((piece) => piece.length))).toBe(50_000);
    // At 1 MB a second, a piece goes 1 ms after each 1000 bytes before it: none early.
    let before = 0;
    for (const piece of pieces) {
      expect(piece.at).toBeCloseTo(before / 1000, 6);
      before += piece.length;
    }
  });

  it('shares its pace among bodies sent at once', async () => {
    const clock = testClock();
    const limit = new TransferRateLimit(2_000_000, clock);
    const [first, second] = await Promise.all([
      readPaced(limit.paced(streamOf(randomBytes(3_000_000))), clock),
      readPaced(limit.paced(streamOf(randomBytes(1_000_000))), clock),
    ]);
    // 4 MB at 2 MB a second: the last piece of either goes 2 s in, less its own time.
    const last = Math.max(first?.pieces.at(-1)?.at ?? 0, second?.pieces.at(-1)?.at ?? 0);
    expect(last).toBeCloseTo(2000 - 100_000 / 2000, 6);
  });

  it('does not make up for time the receiver took with a burst', async () => {
    const clock = testClock();
    const limit = new TransferRateLimit(1_000_000, clock);
    const reader = limit.paced(streamOf(randomBytes(200_000))).getReader();
    await reader.read();
    // The connection stalls for 10 s; the next pieces still go one per 50 ms.
    clock.ms += 10_000;
    await reader.read();
    await reader.read();
    expect(clock.waits).toEqual([50]);
    await reader.cancel();
  });

  it('ends its wait, and closes what it sends, when the request is cut off', async () => {
    let sourceCancelled = false;
    const source = new ReadableStream<Uint8Array>({
      pull: (controller) => controller.enqueue(randomBytes(100_000)),
      cancel: () => {
        sourceCancelled = true;
      },
    });
    let waiting = false;
    let waitEnded = false;
    const limit = new TransferRateLimit(1000, {
      now: () => 0,
      wait: (_ms, signal) =>
        new Promise((_resolve, reject) => {
          waiting = true;
          signal.addEventListener(
            'abort',
            () => {
              waitEnded = true;
              reject(signal.reason as Error);
            },
            { once: true },
          );
        }),
    });
    const reader = limit.paced(source).getReader();
    await reader.read();
    const next = reader.read();
    // The source is read, then the limit waits.
    await new Promise((resolve) => setImmediate(resolve));
    expect(waiting).toBe(true);
    await reader.cancel(new Error('cut off'));
    await expect(next).resolves.toMatchObject({ done: true });
    expect(waitEnded).toBe(true);
    expect(sourceCancelled).toBe(true);
  });

  it('takes an answer in pieces, each once those before it took their time', async () => {
    const clock = testClock();
    const limit = new TransferRateLimit(400_000, clock);
    const answer = streamOf(randomBytes(70_000), randomBytes(5));
    const taken: { at: number; length: number }[] = [];
    for await (const piece of limit.pacedChunks(answer))
      taken.push({ at: clock.ms, length: piece.length });
    // Pieces of 20 000 bytes at 400 kB a second: one each 50 ms.
    expect(taken).toEqual([
      { at: 0, length: 20_000 },
      { at: 50, length: 20_000 },
      { at: 100, length: 20_000 },
      { at: 150, length: 10_000 },
      { at: 175, length: 5 },
    ]);
  });

  it('refuses a limit below 1 kB a second, as usage', () => {
    expect(() => new TransferRateLimit(999)).toThrow(EngineError);
    expect(() => new TransferRateLimit(Number.NaN)).toThrow(/at least 1000 bytes a second/);
  });
});
