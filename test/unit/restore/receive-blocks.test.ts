import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { receiveBlocks, type UnavailableBlock } from '../../../main/restore/receive-blocks.ts';
import { ServiceClient } from '../../../main/service/index.ts';
import { carBytes, rawBlock, type Block } from '../../helpers/cars.ts';
import { startLoopbackServer, type LoopbackServer } from '../../helpers/loopback-server.ts';

// A storage host whose blocks/car answers hold a damaged block: on a bad disk sector every
// time, or once, as bytes flipped on the way. A block damaged twice is reported and the others
// still come; one damaged once comes whole when asked again. An answer left part-way has its
// connection closed rather than held until the timeout.

let server: LoopbackServer;
let url = '';
let good: Block;
let damaged: Block;
/** Other bytes under the damaged block's CID. */
let damagedCopy: Block;
/** How the host answers each request, in turn; requests past the script get `good` alone. */
let script: Array<(response: ServerResponse) => void> = [];
/** Whether the connection of the first answer has closed. */
let firstClosed = false;
let requests = 0;

/** Answers with a CAR of `blocks`, whole or, with `stall`, cut before its end and left open. */
function answerWith(blocks: Block[], stall = false): (response: ServerResponse) => void {
  return (response) =>
    void carBytes([], blocks).then((car) =>
      stall ? response.write(car.subarray(0, car.length - 100)) : response.end(car),
    );
}

beforeAll(async () => {
  good = await rawBlock(randomBytes(4096));
  damaged = await rawBlock(randomBytes(4096));
  damagedCopy = { cid: damaged.cid, bytes: randomBytes(4096) };
  server = await startLoopbackServer((request, response) => {
    request.resume();
    requests += 1;
    if (requests === 1) {
      request.socket.on('close', () => {
        firstClosed = true;
      });
    }
    response.writeHead(200, { 'content-type': 'application/vnd.ipld.car' });
    (script[requests - 1] ?? answerWith([good]))(response);
  });
  url = server.url;
});
afterAll(() => server.close());
beforeEach(() => {
  requests = 0;
  firstClosed = false;
});

/** receiveBlocks of the damaged and the good block, and what it handed on. */
async function receiveBoth(): Promise<{
  received: string[];
  unavailable: Array<[string, UnavailableBlock]>;
  wholeAgain: string[];
  notSent: Set<string>;
}> {
  const client = new ServiceClient({ baseUrl: url, deviceToken: () => 'unused' });
  const received: string[] = [];
  const unavailable: Array<[string, UnavailableBlock]> = [];
  const wholeAgain: string[] = [];
  const notSent = await receiveBlocks(
    client,
    url,
    [damaged.cid.toString(), good.cid.toString()],
    { maxBlockBytes: 1 << 20 },
    {
      onBlock: (cid) => received.push(cid),
      onUnavailable: (cid, why) => unavailable.push([cid, why]),
      onWholeAgain: (cid) => wholeAgain.push(cid),
    },
  );
  return { received, unavailable, wholeAgain, notSent };
}

describe('receiveBlocks', () => {
  it('reports a block damaged twice, gets the others, and closes the answer it stopped reading', async () => {
    script = [answerWith([damagedCopy, good], true), answerWith([damagedCopy, good])];
    const { received, unavailable, wholeAgain, notSent } = await receiveBoth();
    expect(unavailable).toEqual([[damaged.cid.toString(), 'damaged']]);
    expect(received).toEqual([good.cid.toString()]);
    expect(wholeAgain).toEqual([]);
    expect(notSent.size).toBe(0);
    expect(requests).toBe(3);
    // Left paused, it would stay open for the 300 s idle timeout.
    await vi.waitFor(() => expect(firstClosed).toBe(true), { timeout: 2000 });
  });

  it('takes a block damaged once when it comes whole the second time, and says so', async () => {
    script = [answerWith([damagedCopy, good]), answerWith([damaged, good])];
    const { received, unavailable, wholeAgain, notSent } = await receiveBoth();
    expect(unavailable).toEqual([]);
    expect(received).toEqual([damaged.cid.toString(), good.cid.toString()]);
    expect(wholeAgain).toEqual([damaged.cid.toString()]);
    expect(notSent.size).toBe(0);
    expect(requests).toBe(2);
  });
});

// A link that drops every answer after so many bytes (a middlebox limiting how long a response
// may last): each answer brings a block or two before it breaks off, and the batch still comes
// whole, however many answers that takes. Answers that bring nothing, as many in a row as the
// client tries a request, end it.
describe('receiveBlocks through a link that cuts answers off', () => {
  let cutting: LoopbackServer;
  let blocks: Block[] = [];
  /** Bytes of each answer passed before its connection is dropped. */
  let passBytes = 0;
  let asked = 0;

  beforeAll(async () => {
    blocks = await Promise.all(Array.from({ length: 8 }, () => rawBlock(randomBytes(64 * 1024))));
    cutting = await startLoopbackServer((request, response) => {
      const parts: Buffer[] = [];
      request.on('data', (part: Buffer) => parts.push(part));
      request.on('end', () => {
        asked += 1;
        const cids = JSON.parse(Buffer.concat(parts).toString()) as string[];
        const wanted = cids.map((cid) => blocks.find((block) => block.cid.toString() === cid));
        void carBytes(
          [],
          wanted.filter((block) => block !== undefined),
        ).then((car) => {
          response.writeHead(200, { 'content-type': 'application/vnd.ipld.car' });
          response.write(car.subarray(0, passBytes), () => response.socket?.destroy());
        });
      });
    });
  });
  afterAll(() => cutting.close());
  beforeEach(() => {
    asked = 0;
  });

  /** receiveBlocks of every block, through a client that tries a request three times. */
  async function receiveAll(): Promise<string[]> {
    const client = new ServiceClient({
      baseUrl: cutting.url,
      deviceToken: () => 'unused',
      retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
    });
    const received: string[] = [];
    await receiveBlocks(
      client,
      cutting.url,
      blocks.map((block) => block.cid.toString()),
      { maxBlockBytes: 1 << 20 },
      { onBlock: (cid) => received.push(cid), onUnavailable: () => undefined },
    );
    return received;
  }

  it('gets every block when each answer brings some before it breaks off', async () => {
    // Each answer passes its first block and a half.
    passBytes = 100 + 96 * 1024;
    expect(await receiveAll()).toEqual(blocks.map((block) => block.cid.toString()));
    // Eight answers, seven of them cut: more than the three tries a request has.
    expect(asked).toBe(8);
  });

  it('stops with a network error after as many answers in a row that bring nothing as it tries a request', async () => {
    // Each answer passes its header and part of its first block.
    passBytes = 1000;
    await expect(receiveAll()).rejects.toMatchObject({ code: 'network' });
    expect(asked).toBe(3);
  });
});
