import { afterEach, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { cidText, UncheckedCarBlock } from '../../../main/protocol/index.ts';
import { LeafFetcher } from '../../../main/restore/leaf-fetcher.ts';
import { ServiceClient } from '../../../main/service/index.ts';
import { carBytes, rawBlock, type Block } from '../../helpers/cars.ts';
import { startLoopbackServer, type LoopbackServer } from '../../helpers/loopback-server.ts';

// The restore's leaves come in batches of many blocks per blocks/car answer. A leaf is handed
// to its file as soon as it has arrived, not once the whole answer has: over a slow link the
// first files of a batch are written while the rest of it still arrives. A batch that fails
// fails the reads waiting for it, and the batches behind it are not asked for at all.

let server: LoopbackServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Two leaves of 1 MiB (and one small one), read in that order: one batch. */
async function leaves(): Promise<Block[]> {
  return [
    await rawBlock(randomBytes(1 << 20)),
    await rawBlock(randomBytes(1 << 20)),
    await rawBlock(randomBytes(3000)),
  ];
}

function fetcherFor(url: string, blocks: readonly Block[]): LeafFetcher {
  const sizes = new Map(blocks.map((block) => [cidText(block.cid), block.bytes.length]));
  return new LeafFetcher(
    new ServiceClient({ baseUrl: url, deviceToken: () => 'unused' }),
    url,
    { sizeOfText: (text) => sizes.get(text) },
    blocks.map((block) => cidText(block.cid))[Symbol.iterator](),
  );
}

/**
 * Starts `server` answering blocks/car from `blocks`, counting the leaves asked for: how far
 * ahead of its reads the fetcher asks.
 */
async function serveBlocks(
  blocks: readonly Block[],
): Promise<{ url: string; asked: { leaves: number } }> {
  const byCid = new Map(blocks.map((block) => [cidText(block.cid), block]));
  const asked = { leaves: 0 };
  server = await startLoopbackServer((request, response) => {
    const body: Buffer[] = [];
    request.on('data', (chunk: Buffer) => body.push(chunk));
    request.on('end', () => {
      const cids = JSON.parse(Buffer.concat(body).toString()) as string[];
      asked.leaves += cids.length;
      const answer = cids.map((cid) => byCid.get(cid)).filter((block) => block !== undefined);
      void carBytes([], answer).then((car) => {
        response.writeHead(200, { 'content-type': 'application/vnd.ipld.car' });
        response.end(car);
      });
    });
  });
  return { url: server.url, asked };
}

describe('LeafFetcher', () => {
  it('hands a leaf on as soon as it has arrived, while the rest of its batch is on the way', async () => {
    const blocks = await leaves();
    const car = await carBytes([], blocks);
    let stalled: ServerResponse | undefined;
    let requests = 0;
    server = await startLoopbackServer((request, response) => {
      request.resume();
      requests += 1;
      response.writeHead(200, { 'content-type': 'application/vnd.ipld.car' });
      // The first leaf whole and a little of the second, then nothing until the test says.
      response.write(car.subarray(0, (1 << 20) + 5000));
      stalled = response;
    });
    const fetcher = fetcherFor(server.url, blocks);
    const [first, second, third] = blocks as [Block, Block, Block];
    const leaf = await fetcher.take(first.cid, 0);
    if (!(leaf instanceof UncheckedCarBlock)) throw new Error('a 1 MiB leaf came checked');
    expect(Buffer.concat(leaf.check().pieces).equals(first.bytes)).toBe(true);
    // The second leaf waits for the rest of the answer.
    let secondTaken = false;
    const takingSecond = fetcher.take(second.cid, 1).then((part) => {
      secondTaken = true;
      return part;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(secondTaken).toBe(false);
    stalled?.end(car.subarray((1 << 20) + 5000));
    const secondPart = await takingSecond;
    if (!(secondPart instanceof UncheckedCarBlock)) throw new Error('a 1 MiB leaf came checked');
    expect(Buffer.concat(secondPart.check().pieces).equals(second.bytes)).toBe(true);
    // The small leaf was checked as it was read.
    const thirdPart = await fetcher.take(third.cid, 2);
    if (thirdPart instanceof UncheckedCarBlock) throw new Error('a 3000-byte leaf came unchecked');
    expect(Buffer.concat(thirdPart).equals(third.bytes)).toBe(true);
    expect(requests).toBe(1);
  });

  it('asks for only a few batches ahead of its reads, however small the files', async () => {
    // 3 000 files of 10 bytes: their leaves' bytes alone would let every one be asked for.
    const blocks = await Promise.all(Array.from({ length: 3000 }, () => rawBlock(randomBytes(10))));
    const { url, asked } = await serveBlocks(blocks);
    const fetcher = fetcherFor(url, blocks);
    for (let read = 0; read < 300; read += 1)
      await fetcher.take(blocks[read]?.cid ?? blocks[0]!.cid, read);
    // Batches asked for ahead have time to be received; none is asked for beyond them.
    await new Promise((resolve) => setTimeout(resolve, 200));
    // A batch is at most 256 leaves: the 300 taken, and at most three batches beyond them.
    expect(asked.leaves).toBeGreaterThanOrEqual(300);
    expect(asked.leaves).toBeLessThanOrEqual(300 + 3 * 256);
  });

  it('holds a bounded number of small leaves ahead of reads that come slower than the host answers', async () => {
    // 10 000 files of 10 bytes, written more slowly than their leaves arrive: counted by their
    // bytes alone, every leaf was fetched ahead and held.
    const blocks = await Promise.all(
      Array.from({ length: 10_000 }, () => rawBlock(randomBytes(10))),
    );
    const { url, asked } = await serveBlocks(blocks);
    const fetcher = fetcherFor(url, blocks);
    for (let read = 0; read < 300; read += 1) {
      await fetcher.take(blocks[read]?.cid ?? blocks[0]!.cid, read);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    // A held leaf counts as 4 KiB, and batches are asked for ahead below 16 MiB held: 4 096
    // leaves, and the two batches of 256 that may be on the way when that is reached.
    expect(asked.leaves).toBeGreaterThanOrEqual(300);
    expect(asked.leaves).toBeLessThanOrEqual(300 + 4096 + 2 * 256);
  });

  it('fails the reads of a batch that fails, and asks for no batch behind it', async () => {
    // Three batches' worth of leaves (a batch holds at most 8 MiB).
    const blocks = await Promise.all(
      Array.from({ length: 20 }, () => rawBlock(randomBytes(1 << 20))),
    );
    let requests = 0;
    server = await startLoopbackServer((request, response) => {
      request.resume();
      requests += 1;
      // Not retried: the device is not (or no longer) allowed to read.
      response.writeHead(403, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { code: 'forbidden', message: 'no access' } }));
    });
    const fetcher = fetcherFor(server.url, blocks);
    // Files written at once take reads across several batches before any answer came.
    const takes = blocks
      .slice(0, 17)
      .map((block, read) => fetcher.take(block.cid, read).then(() => 'taken', String));
    const outcomes = await Promise.all(takes);
    expect(outcomes.every((outcome) => outcome !== 'taken')).toBe(true);
    expect(new Set(outcomes).size).toBe(1);
    expect(requests).toBe(1);
    // A read after the failure fails at once, with the same error, and asks nothing.
    await expect(fetcher.take(blocks[19]?.cid ?? blocks[0]!.cid, 19)).rejects.toThrow(
      outcomes[0]?.replace(/^\w+: /, ''),
    );
    expect(requests).toBe(1);
  });

  it('goes on fetching a batch on its way when stopped, and lets it go, retries and all, once closed', async () => {
    const blocks = await leaves();
    const [first] = blocks as [Block, Block, Block];
    let requests = 0;
    server = await startLoopbackServer((request, response) => {
      request.resume();
      requests += 1;
      // A service that is going away: each attempt is answered 503, tried again after a wait.
      response.writeHead(503, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { code: 'unavailable', message: 'closing' } }));
    });
    const sizes = new Map(blocks.map((block) => [cidText(block.cid), block.bytes.length]));
    const retryWaits: number[] = [];
    const fetcher = new LeafFetcher(
      new ServiceClient({
        baseUrl: server.url,
        deviceToken: () => 'unused',
        // Each retry's wait lasts until its request is let go.
        delay: (ms) => {
          retryWaits.push(ms);
          return new Promise<void>(() => undefined);
        },
      }),
      server.url,
      { sizeOfText: (text) => sizes.get(text) },
      blocks.map((block) => cidText(block.cid))[Symbol.iterator](),
    );
    const take = fetcher.take(first.cid, 0).then(() => 'taken', String);
    await vi.waitFor(() => expect(retryWaits).toHaveLength(1));
    // Stopped, the restore still writes the files whose leaves are on their way: the batch's
    // request waits to be tried again.
    fetcher.stop(new Error('the disk is full'));
    const settledBefore = await Promise.race([
      take,
      new Promise((r) => setTimeout(r, 200, 'waiting')),
    ]);
    expect(settledBefore).toBe('waiting');
    // Once the restore is over, nothing holds its process: the wait ends, and the read fails.
    fetcher.close();
    expect(await take).toMatch(/stopped|the disk is full/);
    expect(requests).toBe(1);
    expect(retryWaits).toHaveLength(1);
  });
});
