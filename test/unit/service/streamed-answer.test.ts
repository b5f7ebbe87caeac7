import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamedRequest } from '../../../main/service/streamed-answer.ts';
import { startLoopbackServer, type LoopbackServer } from '../../helpers/loopback-server.ts';

// The request behind blocks/car against a server that stalls: the restore must not wait for it
// forever, before the answer or part-way through its body.

let server: LoopbackServer;
let url = '';
beforeAll(async () => {
  server = await startLoopbackServer((request, response) => {
    request.resume();
    if (request.url === '/stall-before-answer') return;
    response.writeHead(200, { 'content-length': '1000' });
    response.write(Buffer.alloc(10));
  });
  url = server.url;
});
afterAll(() => server.close());

describe('streamedRequest', () => {
  it('gives up on a server that never answers', async () => {
    const answer = streamedRequest({
      method: 'POST',
      url: `${url}/stall-before-answer`,
      headers: {},
      body: '[]',
      idleTimeoutMs: 100,
    });
    await expect(answer).rejects.toThrow(/no data from the server/);
  });

  it('fails the body as a retryable network error when the server stalls part-way', async () => {
    const answer = await streamedRequest({
      method: 'GET',
      url: `${url}/stall-in-body`,
      headers: {},
      idleTimeoutMs: 100,
    });
    expect(answer.status).toBe(200);
    const received: Uint8Array[] = [];
    const reading = (async () => {
      for await (const chunk of answer.body) received.push(chunk);
    })();
    await expect(reading).rejects.toMatchObject({ code: 'network', retryable: true });
    expect(Buffer.concat(received).length).toBe(10);
  });
});
