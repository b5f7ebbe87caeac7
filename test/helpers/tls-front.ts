import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

// HTTPS in front of a plain-HTTP service on loopback, with a self-signed certificate made by
// openssl for `localhost`: a household server set up with a certificate of its own, as a
// client meets it. What reaches the front is passed on to the service as it came.

export interface TlsFront {
  /** https://localhost:PORT */
  readonly url: string;
  /** The certificate's PEM file, for NODE_EXTRA_CA_CERTS. */
  readonly certificate: string;
  /** How many clients broke off the handshake so far (as one not trusting the certificate does). */
  handshakesRefused(): number;
  close(): Promise<void>;
}

/** Makes a self-signed certificate for `localhost` in `dir`; returns its key's and its file. */
function selfSignedCertificate(dir: string): { key: string; certificate: string } {
  const key = path.join(dir, 'front-key.pem');
  const certificate = path.join(dir, 'front-cert.pem');
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      certificate,
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost',
    ],
    { encoding: 'utf8' },
  );
  if (made.status !== 0) throw new Error(`openssl could not make a certificate: ${made.stderr}`);
  return { key, certificate };
}

export async function startTlsFront(dir: string, target: string): Promise<TlsFront> {
  const { key, certificate } = selfSignedCertificate(dir);
  const to = new URL(target);
  const server: Server = createServer(
    { key: readFileSync(key), cert: readFileSync(certificate) },
    (incoming, answer) => {
      const passed = request(
        {
          host: to.hostname,
          port: to.port,
          path: incoming.url,
          method: incoming.method,
          headers: incoming.headers,
        },
        (reply) => {
          answer.writeHead(reply.statusCode ?? 502, reply.headers);
          reply.pipe(answer);
        },
      );
      passed.on('error', () => answer.destroy());
      incoming.pipe(passed);
    },
  );
  let refused = 0;
  server.on('tlsClientError', () => {
    refused += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://localhost:${port}`,
    certificate,
    handshakesRefused: () => refused,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
