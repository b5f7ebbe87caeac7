import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { Busboy, type BusboyHeaders } from '@fastify/busboy';
import { invalidRequest, payloadTooLarge } from '../errors.ts';
import { requestChunks } from './request-body.ts';

// Multipart bodies as a sequence of parts, each consumed before the next is parsed. Busboy
// applies backpressure, so a part is never buffered whole here.

export interface MultipartPart {
  readonly name: string;
  /** Busboy reports 'text/plain' when a part carries no Content-Type. */
  readonly contentType: string;
  readonly stream: Readable;
}

export interface MultipartReader {
  readonly parts: AsyncGenerator<MultipartPart>;
  /** Stops parsing; the caller drains what is left of the request. */
  stop(): void;
}

export function readMultipart(request: IncomingMessage, maxParts: number): MultipartReader {
  const busboy = new Busboy({
    headers: request.headers as BusboyHeaders,
    isPartAFile: () => true,
    limits: { parts: maxParts, headerPairs: 16 },
  });
  const queue: MultipartPart[] = [];
  let finished = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  busboy.on('file', (name, stream, _filename, _encoding, contentType) => {
    queue.push({ name, contentType, stream });
    notify();
  });
  busboy.on('finish', () => {
    finished = true;
    notify();
  });
  busboy.on('error', (error: Error) => {
    failure = error;
    notify();
  });
  busboy.on('partsLimit', () => {
    failure = invalidRequest('body: too many parts');
    notify();
  });
  request.pipe(busboy);

  async function* parts(): AsyncGenerator<MultipartPart> {
    for (;;) {
      const next = queue.shift();
      if (next) {
        yield next;
        continue;
      }
      if (failure) throw invalidRequest('body: malformed multipart');
      if (finished) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  }

  return {
    parts: parts(),
    stop() {
      request.unpipe(busboy);
    },
  };
}

/**
 * Yields a part's chunks, failing with 413 once it passes `limit` bytes. Stopping early leaves
 * the part readable, so a caller can still measure the rest (see `partExceeds`).
 */
export async function* limitedPart(part: MultipartPart, limit: number): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of requestChunks(part.stream)) {
    total += chunk.length;
    if (total > limit) throw payloadTooLarge(`${part.name}: larger than ${limit} bytes`);
    yield chunk;
  }
}

/** Reads the rest of a part; true when the part as a whole is larger than `limit`. */
export async function partExceeds(
  part: MultipartPart,
  alreadyRead: number,
  limit: number,
): Promise<boolean> {
  let total = alreadyRead;
  for await (const chunk of requestChunks(part.stream)) {
    total += chunk.length;
    if (total > limit) return true;
  }
  return false;
}
