import {
  createServer,
  request,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { seededRandom } from './seeded-random.ts';

// A small HTTP proxy of ours on loopback that answers with faults on a schedule, to test the
// client's retry policy: a status (with optional Retry-After), a connection reset before any
// answer, no answer at all, the real answer cut off part-way through its body, or with its last byte flipped
// (bytes damaged on the way: the end of a CAR is its last block's data), or passing the request
// through to the real server, at once or after a stall (a slow link); or, as what is not the
// service answers, a redirect elsewhere or a web page. It records when each request arrived, so
// tests can check the backoff. It can also refuse large bodies as a reverse proxy with a body
// size limit does.

export type Fault =
  | 'pass'
  | 'reset'
  /** No answer at all, the connection held open: a server or link that went silent. */
  | 'hang'
  /**
   * The server carries the request out; its status and headers come, then the connection closes
   * after a few body bytes. An answer without a body is lost whole.
   */
  | 'cut'
  /**
   * The server carries the request out; the connection closes before the answer's status comes,
   * so the client cannot tell this from a request that never reached the server.
   */
  | 'lost'
  /** The server's answer whole, but for its body's last byte, flipped. */
  | 'damage'
  /**
   * The server's status and headers but its length, then its body followed by zeros that never
   * end, as a faulty or hostile server may send; until the client hangs up.
   */
  | 'endless'
  /**
   * The server's answer until this many bytes of its body have passed, then the connection
   * closes: a link, or a middlebox, that drops long answers. A shorter answer passes whole.
   */
  | { cutAfterBytes: number }
  /** Passed through after this long, as over a link that stalls; not counted as injected. */
  | { delayMs: number }
  /** An answer of the service's own error shape (§6): 'injected fault' unless `msg` is given. */
  | { status: number; retryAfter?: number; msg?: string }
  /** A web page with this status, as another web server, or a proxy in front, answers. */
  | { status: number; page: string }
  /**
   * A redirect (301 unless `status` is given) to the request's own path below `to`, as a server
   * that moved and left its old address pointing to the new one.
   */
  | { redirectTo: string; status?: number };

const CUT_AFTER_BYTES = 100;

export interface FaultProxy {
  readonly url: string;
  /** Arrival times (ms) and paths of every request seen. */
  readonly seen: Array<{ at: number; method: string; path: string }>;
  /** How many requests got a fault instead of the real answer. */
  injected(): number;
  /**
   * Faults for the next requests (only those whose path matches `paths`, if given), in order;
   * when it runs out, requests pass.
   */
  schedule(faults: Fault[], paths?: RegExp): void;
  /**
   * Bodies over `maxBytes` (by Content-Length) get nginx's 413, an HTML page, without reaching
   * the server; undefined lifts the limit. Each counts as injected.
   */
  limitBodies(maxBytes: number | undefined): void;
  /**
   * A fault drawn for each request with probability p, from a seeded generator: 500, 503, 429
   * or a reset, none of which reaches the server; with `lostAnswers`, also answers lost after
   * the server carried the request out ('cut').
   */
  randomFaults(p: number, seed: number, options?: { lostAnswers?: boolean }): void;
  /**
   * The fault of each request not given one by `schedule`, chosen from its method and path;
   * undefined stops choosing.
   */
  faultEach(choose: ((method: string, path: string) => Fault) | undefined): void;
  close(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const targetUrl = new URL(target);
  let queue: Fault[] = [];
  let queuePaths: RegExp | undefined;
  let random: { p: number; next: () => number; lostAnswers: boolean } | undefined;
  let chooser: ((method: string, path: string) => Fault) | undefined;
  const seen: FaultProxy['seen'] = [];
  let injected = 0;
  let bodyLimit: number | undefined;

  const forward = (
    incoming: IncomingMessage,
    outgoing: ServerResponse,
    fault: 'pass' | 'cut' | 'lost' | 'damage' | 'endless' | { cutAfterBytes: number } = 'pass',
  ): void => {
    const upstream = request(
      {
        host: targetUrl.hostname,
        port: targetUrl.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers,
      },
      (answer) => {
        const head = (): void => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        };
        if (fault === 'pass') {
          head();
          answer.pipe(outgoing);
          return;
        }
        if (fault === 'lost') {
          answer.resume();
          outgoing.socket?.destroy();
          return;
        }
        if (typeof fault === 'object') {
          head();
          let passed = 0;
          answer.on('data', (chunk: Buffer) => {
            const part = chunk.subarray(0, fault.cutAfterBytes - passed);
            passed += part.length;
            if (passed < fault.cutAfterBytes) {
              outgoing.write(part);
              return;
            }
            outgoing.write(part, () => outgoing.socket?.destroy());
            answer.destroy();
          });
          answer.once('end', () => outgoing.end());
          return;
        }
        if (fault === 'endless') {
          const headers = { ...answer.headers };
          delete headers['content-length'];
          outgoing.writeHead(answer.statusCode ?? 502, headers);
          let hungUp = false;
          outgoing.once('close', () => {
            hungUp = true;
          });
          const zeros = Buffer.alloc(64 * 1024);
          const more = (): void => {
            while (!hungUp && outgoing.write(zeros));
            if (!hungUp) outgoing.once('drain', more);
          };
          answer.on('data', (chunk: Buffer) => outgoing.write(chunk));
          answer.once('end', more);
          return;
        }
        if (fault === 'damage') {
          const chunks: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => chunks.push(chunk));
          answer.once('end', () => {
            const body = Buffer.concat(chunks);
            const last = body.length - 1;
            if (last >= 0) body[last] = (body[last] ?? 0) ^ 0x01;
            const headers = { ...answer.headers, 'content-length': String(body.length) };
            delete headers['transfer-encoding'];
            outgoing.writeHead(answer.statusCode ?? 502, headers);
            outgoing.end(body);
          });
          return;
        }
        let cutOff = false;
        answer.once('data', (chunk: Buffer) => {
          cutOff = true;
          head();
          outgoing.write(chunk.subarray(0, CUT_AFTER_BYTES), () => outgoing.socket?.destroy());
          answer.destroy();
        });
        // An answer without a body (a 204) has nothing to cut: it is lost whole.
        answer.once('end', () => {
          if (!cutOff) outgoing.socket?.destroy();
        });
      },
    );
    upstream.on('error', () => outgoing.destroy());
    incoming.pipe(upstream);
  };

  const server: Server = createServer((incoming, outgoing) => {
    seen.push({ at: Date.now(), method: incoming.method ?? '', path: incoming.url ?? '' });
    if (bodyLimit !== undefined && Number(incoming.headers['content-length'] ?? 0) > bodyLimit) {
      injected += 1;
      incoming.resume();
      outgoing.writeHead(413, { 'content-type': 'text/html', connection: 'close' });
      outgoing.end('<html><head><title>413 Request Entity Too Large</title></head></html>\n');
      return;
    }
    const scheduled = queuePaths === undefined || queuePaths.test(incoming.url ?? '');
    let fault: Fault =
      (scheduled ? queue.shift() : undefined) ??
      chooser?.(incoming.method ?? '', incoming.url ?? '') ??
      'pass';
    if (random && fault === 'pass' && random.next() < random.p) {
      const pick = random.next();
      fault =
        random.lostAnswers && random.next() < 0.25
          ? 'cut'
          : pick < 0.4
            ? { status: 500 }
            : pick < 0.6
              ? { status: 503 }
              : pick < 0.8
                ? { status: 429, retryAfter: 1 }
                : 'reset';
    }
    if (
      fault === 'pass' ||
      fault === 'cut' ||
      fault === 'lost' ||
      fault === 'damage' ||
      fault === 'endless'
    ) {
      if (fault !== 'pass') injected += 1;
      forward(incoming, outgoing, fault);
      return;
    }
    if (typeof fault === 'object' && 'cutAfterBytes' in fault) {
      injected += 1;
      forward(incoming, outgoing, fault);
      return;
    }
    if (typeof fault === 'object' && 'delayMs' in fault) {
      setTimeout(() => forward(incoming, outgoing), fault.delayMs);
      return;
    }
    injected += 1;
    incoming.resume();
    if (fault === 'reset') {
      incoming.socket.destroy();
      return;
    }
    if (fault === 'hang') return;
    if ('redirectTo' in fault) {
      outgoing.writeHead(fault.status ?? 301, {
        location: `${fault.redirectTo}${incoming.url ?? ''}`,
        'content-type': 'text/html',
      });
      outgoing.end('<html><body>Moved</body></html>\n');
      return;
    }
    if ('page' in fault) {
      outgoing.writeHead(fault.status, { 'content-type': 'text/html; charset=utf-8' });
      outgoing.end(fault.page);
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (fault.retryAfter !== undefined) headers['retry-after'] = String(fault.retryAfter);
    outgoing.writeHead(fault.status, headers);
    outgoing.end(
      JSON.stringify({
        msg: fault.msg ?? 'injected fault',
        code: fault.status === 429 ? 'rate_limited' : 'internal',
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    injected: () => injected,
    schedule(faults, paths) {
      queue = [...faults];
      queuePaths = paths;
    },
    limitBodies(maxBytes) {
      bodyLimit = maxBytes;
    },
    randomFaults(p, seed, options) {
      random = { p, next: seededRandom(seed).next, lostAnswers: options?.lostAnswers ?? false };
    },
    faultEach(choose) {
      chooser = choose;
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
