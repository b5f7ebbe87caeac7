import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { MEDIA_JSON } from '../../main/protocol/index.ts';
import { invalidRequest, payloadTooLarge, ServiceError, unsupportedMediaType } from '../errors.ts';

// Request bodies are read by the handlers themselves, never by a framework parser, so each
// route can apply the spec's check order (§6) and its limits while the bytes stream in.

/** The media type's essence, lowercased; '' when absent. */
export function mediaTypeOf(request: IncomingMessage): { essence: string; params: string[] } {
  const header = request.headers['content-type'] ?? '';
  const [essence = '', ...params] = header.split(';').map((part) => part.trim().toLowerCase());
  return { essence, params: params.filter((param) => param.length > 0) };
}

export function isJsonMediaType(request: IncomingMessage): boolean {
  const { essence, params } = mediaTypeOf(request);
  if (essence !== MEDIA_JSON) return false;
  return params.every(
    (param) => param.replace(/\s+/g, '') === 'charset=utf-8' || param === 'charset="utf-8"',
  );
}

/**
 * The request's chunks. Unlike `for await` over the stream itself, stopping early leaves the
 * stream paused instead of destroying the socket, so an error answer can still be sent.
 */
export async function* requestChunks(request: Readable): AsyncGenerator<Buffer> {
  for (;;) {
    const chunk = request.read() as Buffer | null;
    if (chunk !== null) {
      yield chunk;
      continue;
    }
    if (request.readableEnded) return;
    await new Promise<void>((resolve, reject) => {
      const cleanup = (): void => {
        request.off('readable', onReadable);
        request.off('end', onReadable);
        request.off('error', onError);
        request.off('close', onClose);
      };
      const onReadable = (): void => {
        cleanup();
        resolve();
      };
      const onError = (error: Error): void => {
        cleanup();
        reject(error);
      };
      const onClose = (): void => {
        cleanup();
        if (request.readableEnded) resolve();
        else reject(new ServiceError('invalid_request', 'body: request aborted'));
      };
      request.once('readable', onReadable);
      request.once('end', onReadable);
      request.once('error', onError);
      request.once('close', onClose);
    });
  }
}

export function declaredLength(request: IncomingMessage): number | undefined {
  const header = request.headers['content-length'];
  if (header === undefined) return undefined;
  const value = Number(header);
  return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** Yields the body's chunks, failing with 413 at the first byte over `limit`. */
export async function* limitedChunks(
  request: IncomingMessage,
  limit: number,
  what: string,
): AsyncGenerator<Buffer> {
  const declared = declaredLength(request);
  if (declared !== undefined && declared > limit)
    throw payloadTooLarge(`${what}: larger than ${limit} bytes`);
  let total = 0;
  for await (const chunk of requestChunks(request)) {
    if (total + chunk.length > limit) {
      const fitting = chunk.subarray(0, limit - total);
      if (fitting.length > 0) yield fitting;
      throw payloadTooLarge(`${what}: larger than ${limit} bytes`);
    }
    total += chunk.length;
    yield chunk;
  }
}

export async function readLimited(
  request: IncomingMessage,
  limit: number,
  what: string,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of limitedChunks(request, limit, what)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

export function parseJsonText(bytes: Uint8Array, what: string): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw invalidRequest(`${what}: not valid UTF-8`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalidRequest(`${what}: not valid JSON`);
  }
}

/** Reads a JSON body: 415 for another media type, 413 over the limit, 400 for bad JSON. */
export async function readJsonBody(request: IncomingMessage, limit: number): Promise<unknown> {
  if (!isJsonMediaType(request)) throw unsupportedMediaType(MEDIA_JSON);
  const bytes = await readLimited(request, limit, 'body');
  return parseJsonText(bytes, 'body');
}

/**
 * For endpoints marked "no body" (§2.4): an empty body passes under any media type; otherwise
 * it must be JSON (415) and exactly `{}` (400).
 */
export async function readNoBody(request: IncomingMessage, limit: number): Promise<void> {
  const chunks: Buffer[] = [];
  let checkedType = false;
  for await (const chunk of limitedChunks(request, limit, 'body')) {
    if (!checkedType && chunk.length > 0) {
      if (!isJsonMediaType(request)) throw unsupportedMediaType(MEDIA_JSON);
      checkedType = true;
    }
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  if (bytes.length === 0) return;
  const value = parseJsonText(bytes, 'body');
  if (
    typeof value !== 'object' ||
    value === null ||
    Array.isArray(value) ||
    Object.keys(value).length > 0
  ) {
    const [first] = typeof value === 'object' && value !== null ? Object.keys(value) : [];
    throw invalidRequest(
      first !== undefined ? `${first}: unknown field` : 'body: must be empty or {}',
    );
  }
}

/**
 * Reads and discards at most `maxBytes` of what is left of the body, then closes the
 * connection if more keeps coming (§14), so the client can read an early error answer.
 */
export function drainRequest(request: IncomingMessage, maxBytes: number): void {
  if (request.readableEnded || request.destroyed) return;
  let drained = 0;
  request.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > maxBytes) request.socket.destroy();
  });
  request.on('error', () => {
    // The client went away mid-drain; nothing is left to answer.
  });
  request.resume();
}
