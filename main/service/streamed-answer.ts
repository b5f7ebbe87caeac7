import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { EngineError } from '../api/index.ts';

// A request whose answer is a long binary body (a blocks/car CAR), made with node:http rather
// than fetch. Fetch hands a body over through web streams, a few promises and a transferred
// buffer for every 64 KiB; on a restore of 1 GiB that machinery cost about 6 % of the CPU
// and 4 % of the time, against a plain Node stream. Everything else stays on fetch: its
// answers are small.

export interface StreamedAnswer {
  readonly status: number;
  /** A header's value, or null (as fetch's Headers.get). */
  header(name: string): string | null;
  /** The body's bytes as they arrive; a connection that breaks mid-way fails as `network`. */
  readonly body: AsyncIterable<Uint8Array>;
  /** The whole body as text, for an error answer. */
  text(): Promise<string>;
}

export interface StreamedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** How long the connection may go without a byte before it is given up (default 300 s). */
  readonly idleTimeoutMs?: number;
}

/** As fetch's own (undici's headers and body timeouts): a server that stalls is let go. */
const IDLE_TIMEOUT_MS = 300_000;

async function* chunksOf(response: IncomingMessage, url: string): AsyncGenerator<Uint8Array> {
  try {
    for await (const chunk of response) yield chunk as Buffer;
  } catch (error) {
    // The server hung up or the link dropped before the answer was whole.
    const detail = error instanceof Error ? error.message : String(error);
    throw new EngineError(
      'network',
      `the connection to ${new URL(url).origin} broke part-way through an answer (${detail})`,
      { retryable: true, cause: error },
    );
  }
}

async function textOf(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Sends the request and resolves once the answer's status and headers are in. Sockets are
 * kept alive between requests by Node's global agents. A failure to connect or send rejects
 * with the error as Node raised it; the caller decides whether to retry.
 */
export function streamedRequest(spec: StreamedRequest): Promise<StreamedAnswer> {
  const url = new URL(spec.url);
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const headers: Record<string, string> = { ...spec.headers };
  if (spec.body !== undefined) headers['content-length'] = String(Buffer.byteLength(spec.body));
  return new Promise((resolve, reject) => {
    const request = send(url, { method: spec.method, headers }, (response) => {
      resolve({
        status: response.statusCode ?? 0,
        header: (name) => {
          const value = response.headers[name.toLowerCase()];
          return typeof value === 'string' ? value : (value?.join(', ') ?? null);
        },
        body: chunksOf(response, spec.url),
        text: () => textOf(response),
      });
    });
    const idleMs = spec.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    // Before the answer this fails the request; during its body, the body (`network`).
    request.setTimeout(idleMs, () =>
      request.destroy(new Error(`no data from the server for ${idleMs / 1000} s`)),
    );
    request.on('error', reject);
    request.end(spec.body);
  });
}
