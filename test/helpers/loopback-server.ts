import { createServer, type RequestListener } from 'node:http';

// A bare node:http server on loopback, for tests of how the client meets a server that
// misbehaves in ways the real service never does (stalls, damaged answers).

export interface LoopbackServer {
  /** http://127.0.0.1:PORT */
  readonly url: string;
  /** Drops every connection, open answers included, and stops listening. */
  close(): Promise<void>;
}

export async function startLoopbackServer(handler: RequestListener): Promise<LoopbackServer> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('the server has no address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
