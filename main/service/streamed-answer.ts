import { type Dispatcher, errors, request } from 'undici';
import { EngineError } from '../api/index.ts';

// A request whose answer is a long binary body (a blocks/car CAR), made with undici's request
// rather than fetch or node:http.
// - Fetch hands a body over through web streams, a few promises and a transferred buffer for
//   every 64 KiB; on a restore of 1 GiB that machinery cost about 6 % of the CPU.
// - node:http's parser (Node 20) copies every piece of a body into a new buffer before handing
//   it on, so each byte received was allocated and copied twice. undici's parser hands on
//   views of the buffers the socket read into. Restores of the bench set took about 8 % less
//   time with it (seven alternating pairs, each pair faster with undici).
// Everything else stays on fetch: its answers are small.

/** An answer's bytes as they arrive; a connection that breaks mid-way fails as `network`. */
export interface AnswerBody extends AsyncIterable<Uint8Array> {
  /**
   * Stops the answer where it is and closes its connection, for a reader that stops before the
   * end (a damaged block). Left unread, the answer would hold its connection, paused, until the
   * idle timeout. Does nothing once the answer has been read to its end.
   */
  cancel(): void;
}

export interface StreamedAnswer {
  readonly status: number;
  /** A header's value, or null (as fetch's Headers.get). */
  header(name: string): string | null;
  readonly body: AnswerBody;
  /** The whole body as text, for an error answer. */
  text(): Promise<string>;
}

export interface StreamedRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** How long the connection may go without a byte before it is given up (default 300 s). */
  readonly idleTimeoutMs?: number;
  /** Instead of undici's global dispatcher. */
  readonly dispatcher?: Dispatcher;
  /** Cuts the request off, and its answer's body, when it fires. */
  readonly signal?: AbortSignal;
}

/** As fetch's own (undici's headers and body timeouts): a server that stalls is let go. */
const IDLE_TIMEOUT_MS = 300_000;

function isTimeout(error: unknown): boolean {
  return error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError;
}

/** undici's timeout errors in our words; anything else as it came. */
function stallOrAsIs(error: unknown, idleMs: number): unknown {
  if (!isTimeout(error)) return error;
  return new Error(`no data from the server for ${idleMs / 1000} s`, { cause: error });
}

async function* chunksOf(
  body: AsyncIterable<Uint8Array>,
  url: string,
  idleMs: number,
): AsyncGenerator<Uint8Array> {
  try {
    // Leaving this loop early (the reader stopped) destroys the body and so its connection.
    for await (const chunk of body) yield chunk;
  } catch (error) {
    // The server hung up, stalled, or the link dropped before the answer was whole.
    const cause = stallOrAsIs(error, idleMs);
    const detail = cause instanceof Error ? cause.message : String(cause);
    throw new EngineError(
      'network',
      `the connection to ${new URL(url).origin} broke part-way through an answer (${detail})`,
      { retryable: true, cause },
    );
  }
}

/**
 * Sends the request and resolves once the answer's status and headers are in. Connections are
 * kept alive between requests by undici's global dispatcher. A failure to connect or send
 * rejects with the error as undici raised it (a stall before the answer as "no data from the
 * server"); the caller decides whether to retry.
 */
export async function streamedRequest(spec: StreamedRequest): Promise<StreamedAnswer> {
  const idleMs = spec.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  let answer: Awaited<ReturnType<typeof request>>;
  try {
    answer = await request(spec.url, {
      method: spec.method,
      headers: spec.headers,
      ...(spec.body === undefined ? {} : { body: spec.body }),
      headersTimeout: idleMs,
      bodyTimeout: idleMs,
      ...(spec.dispatcher ? { dispatcher: spec.dispatcher } : {}),
      ...(spec.signal ? { signal: spec.signal } : {}),
    });
  } catch (error) {
    throw stallOrAsIs(error, idleMs);
  }
  const { statusCode, headers, body } = answer;
  return {
    status: statusCode,
    header: (name) => {
      const value = headers[name.toLowerCase()];
      return typeof value === 'string' ? value : (value?.join(', ') ?? null);
    },
    body: Object.assign(chunksOf(body, spec.url, idleMs), { cancel: () => body.destroy() }),
    text: () => body.text(),
  };
}
