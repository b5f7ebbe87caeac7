import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { socketDispatcher } from '../../../main/service/socket-dispatcher.ts';
import { startLoopbackServer, type LoopbackServer } from '../../helpers/loopback-server.ts';

// The dispatcher sends one origin through a Unix socket and every other one over the network:
// the embedded service's requests take its socket, and a storage host elsewhere is still
// reached at its own address.

const folder = mkdtempSync(path.join(os.tmpdir(), 'canopy-dispatcher-'));
const socketPath = path.join(folder, 'service.sock');
/** A name no resolver knows: only the socket can reach it. */
const socketOrigin = 'http://canopy-service.invalid:8080';
let onSocket: Server;
let elsewhere: LoopbackServer;

beforeAll(async () => {
  onSocket = createServer((_request, response) => response.end('from the socket'));
  await new Promise<void>((resolve) => onSocket.listen(socketPath, resolve));
  elsewhere = await startLoopbackServer((_request, response) => response.end('from the network'));
});
afterAll(async () => {
  onSocket.closeAllConnections();
  await new Promise<void>((resolve) => onSocket.close(() => resolve()));
  await elsewhere.close();
  rmSync(folder, { recursive: true, force: true });
});

describe('socketDispatcher', () => {
  it('reaches its origin through the socket and any other origin over the network', async () => {
    const dispatcher = socketDispatcher(socketOrigin, socketPath);
    try {
      const local = await request(`${socketOrigin}/api/v1/whoami`, { dispatcher });
      expect(await local.body.text()).toBe('from the socket');
      const remote = await request(`${elsewhere.url}/api/v1/whoami`, { dispatcher });
      expect(await remote.body.text()).toBe('from the network');
    } finally {
      await dispatcher.close();
    }
  });
});
