import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

// An HTTP proxy on loopback, as a workplace network's: it opens a tunnel (CONNECT) to the host
// and port asked for, and passes the bytes both ways. It keeps the hosts it was asked for.

export interface ConnectProxy {
  /** http://127.0.0.1:PORT, for HTTP_PROXY and HTTPS_PROXY. */
  readonly url: string;
  /** The `host:port` of each tunnel opened so far, in order. */
  readonly tunnels: string[];
  close(): Promise<void>;
}

/** `refuseWith`: a status the proxy answers every CONNECT with instead (407: a login needed). */
export async function startConnectProxy(refuseWith?: number): Promise<ConnectProxy> {
  const tunnels: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((_request, answer) => {
    // Only tunnels are passed on: a plain request to the proxy is none of a client's business.
    answer.writeHead(405).end();
  });
  server.on('connect', (request, client: Socket, head: Buffer) => {
    const target = request.url ?? '';
    tunnels.push(target);
    if (refuseWith !== undefined) {
      client.end(`HTTP/1.1 ${refuseWith} Refused\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    const [host, port] = [
      target.slice(0, target.lastIndexOf(':')),
      target.slice(target.lastIndexOf(':') + 1),
    ];
    const upstream = connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    tunnels,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
