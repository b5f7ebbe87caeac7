import { connect } from 'node:net';

// The bench's reading client: POSTs JSON over a plain socket and counts the answer's body
// bytes. Every read lands in one reused buffer (`onread`), so the client allocates nothing per
// chunk. Through node:http each 64 KiB chunk was a fresh buffer, and the collector's work on
// them made the client, not the server, the slower side of a blocks/car read: the figure
// measured the bench.

const readBuffer = Buffer.allocUnsafe(1 << 20);
const HEAD_END = Buffer.from('\r\n\r\n');

/** Resolves with the body's byte count once the server closes; rejects unless it answered 200. */
export function postCountingBytes(url: string, token: string, json: unknown): Promise<number> {
  const { hostname, port, pathname } = new URL(url);
  const body = JSON.stringify(json);
  const request =
    `POST ${pathname} HTTP/1.1\r\nhost: ${hostname}:${port}\r\n` +
    `authorization: Bearer ${token}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
  return new Promise((resolve, reject) => {
    // Bytes before the end of the head are kept; after it they are only counted.
    let head: Buffer | undefined = Buffer.alloc(0);
    let status = 0;
    let expected = -1;
    let bodyBytes = 0;
    const socket = connect({
      host: hostname,
      port: Number(port),
      onread: {
        buffer: readBuffer,
        callback(read: number, buffer: Uint8Array): boolean {
          if (head === undefined) {
            bodyBytes += read;
            return true;
          }
          head = Buffer.concat([head, buffer.subarray(0, read)]);
          const end = head.indexOf(HEAD_END);
          if (end < 0) return true;
          const text = head.subarray(0, end).toString('latin1');
          status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
          expected = Number(/\r\ncontent-length:\s*(\d+)/i.exec(text)?.[1] ?? -1);
          bodyBytes = head.length - end - HEAD_END.length;
          head = undefined;
          return true;
        },
      },
    });
    socket.on('error', reject);
    socket.on('close', () => {
      if (status !== 200) reject(new Error(`read failed: ${status}`));
      else if (bodyBytes !== expected)
        reject(new Error(`read cut short: ${bodyBytes} of ${expected} bytes`));
      else resolve(bodyBytes);
    });
    // Not `end`: a request whose socket half-closes counts as abandoned to the server.
    socket.write(request);
  });
}
