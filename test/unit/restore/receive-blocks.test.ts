import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import { receiveBlocks, type UnavailableBlock } from '../../../main/restore/receive-blocks.ts';
import { ServiceClient } from '../../../main/service/index.ts';
import { carBytes, rawBlock, type Block } from '../../helpers/cars.ts';
import { startLoopbackServer, type LoopbackServer } from '../../helpers/loopback-server.ts';

// A storage host whose first blocks/car answer starts with a damaged block and then stalls, as
// a host with a bad disk sector might. The restore reports that block, asks again for the
// others, and closes the stalled answer's connection rather than hold it until the timeout.

let server: LoopbackServer;
let url = '';
let good: Block;
let damaged: Block;
/** Whether the connection of the first (stalled) answer has closed. */
let firstClosed = false;
let requests = 0;

beforeAll(async () => {
  good = await rawBlock(randomBytes(4096));
  damaged = await rawBlock(randomBytes(4096));
  server = await startLoopbackServer((request, response) => {
    request.resume();
    requests += 1;
    response.writeHead(200, { 'content-type': 'application/vnd.ipld.car' });
    if (requests === 1) {
      request.socket.on('close', () => {
        firstClosed = true;
      });
      // Other bytes under the damaged block's CID, then the answer stays open.
      void carBytes([], [{ cid: damaged.cid, bytes: randomBytes(4096) }, good]).then((car) =>
        response.write(car.subarray(0, car.length - 100)),
      );
      return;
    }
    void carBytes([], [good]).then((car) => response.end(car));
  });
  url = server.url;
});
afterAll(() => server.close());

describe('receiveBlocks', () => {
  it('reports a damaged block, gets the others, and closes the answer it stopped reading', async () => {
    const client = new ServiceClient({ baseUrl: url, deviceToken: () => 'unused' });
    const received: string[] = [];
    const unavailable: Array<[string, UnavailableBlock]> = [];
    const notSent = await receiveBlocks(
      client,
      url,
      [damaged.cid.toString(), good.cid.toString()],
      { maxBlockBytes: 1 << 20 },
      (cid) => received.push(cid),
      (cid, why) => unavailable.push([cid, why]),
    );
    expect(unavailable).toEqual([[damaged.cid.toString(), 'damaged']]);
    expect(received).toEqual([good.cid.toString()]);
    expect(notSent.size).toBe(0);
    expect(requests).toBe(2);
    // Left paused, it would stay open for the 300 s idle timeout.
    await vi.waitFor(() => expect(firstClosed).toBe(true), { timeout: 2000 });
  });
});
