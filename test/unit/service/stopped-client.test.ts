import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ServerResponse } from 'node:http';
import { ServiceClient } from '../../../main/service/index.ts';
import { startLoopbackServer, type LoopbackServer } from '../../helpers/loopback-server.ts';

// A client stopped by one signal, then by another (the restore's fetcher cuts off its own
// requests once the restore is over), is stopped by either: Ctrl-C still stops its requests.

let server: LoopbackServer | undefined;
const unanswered: ServerResponse[] = [];
afterEach(async () => {
  for (const response of unanswered.splice(0)) response.destroy();
  await server?.close();
  server = undefined;
});

describe('ServiceClient.stoppedBy', () => {
  it('is stopped by the signal it had before as much as by the one it is given', async () => {
    server = await startLoopbackServer((request, response) => {
      request.resume();
      // Never answered: only a stop ends the request.
      unanswered.push(response);
    });
    for (const which of ['before', 'given'] as const) {
      const before = new AbortController();
      const given = new AbortController();
      const client = new ServiceClient({ baseUrl: server.url, deviceToken: () => 'token' })
        .stoppedBy(before.signal)
        .stoppedBy(given.signal);
      const request = client.getUser().then(
        () => 'answered',
        (error: unknown) => (error as { code?: string }).code,
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      (which === 'before' ? before : given).abort();
      expect(await request).toBe('stopped');
    }
  });

  it('leaves no timer behind when stopped while it waits to try again', async () => {
    // Every attempt answered 503, to be tried again a minute later.
    server = await startLoopbackServer((request, response) => {
      request.resume();
      response.writeHead(503, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { code: 'unavailable', message: 'restarting' } }));
    });
    const timers = (): number =>
      process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const stop = new AbortController();
    let retries = 0;
    const client = new ServiceClient({
      baseUrl: server.url,
      deviceToken: () => 'token',
      retry: { attempts: 3, baseDelayMs: 60_000, maxDelayMs: 60_000 },
      onRetry: () => (retries += 1),
    }).stoppedBy(stop.signal);
    const request = client.getUser().then(
      () => 'answered',
      (error: unknown) => (error as { code?: string }).code,
    );
    await vi.waitFor(() => expect(retries).toBe(1));
    expect(timers()).toBe(before + 1);
    stop.abort();
    expect(await request).toBe('stopped');
    // A timer left would hold a command's process that long after it said it had stopped.
    expect(timers()).toBe(before);
  });
});
