import { afterEach, describe, expect, it } from 'vitest';
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
});
