import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../../main/service/index.ts';

// A streamed request body (a shard of up to 64 MiB, a push's metadata CAR of up to 128 MiB)
// must leave memory as it leaves for the connection. Node's fetch tees a streamed body to keep
// a copy for a redirect unless redirects are refused, and the copy, never read, held every byte
// sent until the answer came: a backup of 750 000 files peaked 70 MB higher for it. Here a
// shard's chunks are watched through weak references while the host holds its answer back.

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const MiB = 1 << 20;
const CHUNKS = 24;

let server: Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

describe('a streamed request body', () => {
  it('is not kept in memory once sent, while the answer is awaited', async () => {
    let received = 0;
    let allReceived!: () => void;
    const bodyIn = new Promise<void>((resolve) => (allReceived = resolve));
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    server = createServer((request, response) => {
      request.on('data', (chunk: Buffer) => {
        received += chunk.length;
      });
      request.on('end', () => {
        allReceived();
        void answered.then(() => {
          response.writeHead(200, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ blocks: 1, bytes: received, received_total: received }));
        });
      });
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const host = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const sent: WeakRef<Uint8Array>[] = [];
    let next = 0;
    const stream = (): ReadableStream<Uint8Array> =>
      new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            if (next === CHUNKS) {
              controller.close();
              return;
            }
            next += 1;
            const chunk = new Uint8Array(MiB).fill(next);
            sent.push(new WeakRef(chunk));
            controller.enqueue(chunk);
          },
        },
        { highWaterMark: 1 },
      );
    const client = new ServiceClient({ baseUrl: host, deviceToken: () => 'unused' });
    const upload = client.uploadShard(host, 'token', 'version', 'shard', {
      stream,
      bytes: CHUNKS * MiB,
    });

    await bodyIn;
    // Weak references let go only in a task after the one that made them.
    await new Promise((resolve) => setTimeout(resolve, 10));
    collectGarbage();
    await new Promise((resolve) => setTimeout(resolve, 10));
    collectGarbage();
    const kept = sent.filter((ref) => ref.deref() !== undefined).length;
    answer();
    await expect(upload).resolves.toMatchObject({ bytes: CHUNKS * MiB });
    expect(received).toBe(CHUNKS * MiB);
    // The last chunk or two may still be referenced along the way; not the whole body.
    expect(kept).toBeLessThanOrEqual(2);
  });
});
