import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http-client.ts';
import { storedBlock } from '../helpers/stored-blocks.ts';
import { openDatabase } from '../../server/store/database.ts';
import { takeUnheldBlocks } from '../../server/store/stored-blocks.ts';
import { carBytes, metadataCar, rawBlock, shardOf } from '../helpers/cars.ts';
import {
  complete,
  createBucket,
  enrolledDevice,
  push,
  storeVersion,
  uploadShard,
} from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, SMALL_LIMITS, type TestService } from '../helpers/test-service.ts';
import { BLOCKS_NOT_HELD_MSG, rawCidOf, signCompactJws } from '../../main/protocol/index.ts';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import path from 'node:path';
import { CarReader } from '@ipld/car';

// §18 items 32–34 and 39: shards, storage authorizations, missing blocks, block reads.

let service: TestService;
let ann: TestDevice;
let bob: TestDevice;
beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
  bob = await enrolledDevice(service, 'bob@example.org');
});
afterAll(async () => service.close());

async function pending(device: TestDevice, expected: number, bucketName: string) {
  const bucketId = await createBucket(service, device, bucketName);
  const pushed = await push(service, device, {
    bucketId,
    expectedDataSize: expected,
    previousId: null,
  });
  return {
    bucketId,
    id: pushed.json.id as string,
    sa: pushed.json.storage_authorization as string,
  };
}

/** The temporary tables of the service's database: a shard's blocks while it streams in. */
function stagedTables(): unknown[] {
  return service.service.ctx.db.prepare('SELECT name FROM temp.sqlite_master').all();
}

async function putShard(id: string, sa: string, shardCid: string, body: Uint8Array) {
  return call('PUT', `${service.api}/upload/${id}/${shardCid}`, {
    token: sa,
    body,
    contentType: 'application/vnd.ipld.car',
  });
}

describe('§18 shard upload', () => {
  it('32: digest mismatch, bad block and max_bytes are refused; a resent shard repeats its result', async () => {
    const { id, sa } = await pending(ann, 3000, 's32');
    const a = await rawBlock();
    const b = await rawBlock();
    const shard = await shardOf([a, b]);
    const other = await shardOf([a]);
    const mismatch = await putShard(id, sa, other.cid.toString(), shard.car);
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.msg).toMatch(/^shard_cid:/);
    const lying = Buffer.from(shard.car);
    lying[lying.length - 1] = (lying[lying.length - 1] ?? 0) ^ 1;
    const lyingShard = await shardOf([]);
    const bad = await putShard(id, sa, lyingShard.cid.toString(), lying);
    expect(bad.status).toBe(400);
    const first = await putShard(id, sa, shard.cid.toString(), shard.car);
    expect(first.json).toEqual({ blocks: 2, bytes: 2048, received_total: 2048 });
    const resent = await putShard(id, sa, shard.cid.toString(), shard.car);
    expect(resent.status).toBe(200);
    expect(resent.json).toEqual({ blocks: 2, bytes: 2048, received_total: 2048 });
    const overlapping = await uploadShard(service, sa, id, [
      a,
      b,
      await rawBlock(new Uint8Array(900)),
    ]);
    expect(overlapping.json).toEqual({ blocks: 3, bytes: 2948, received_total: 2948 });
    const tooMuch = await uploadShard(service, sa, id, [
      await rawBlock(new Uint8Array(100).fill(7)),
    ]);
    expect(tooMuch.status).toBe(413);
    expect(tooMuch.json.code).toBe('payload_too_large');
    const rootless = await carBytes([], [await rawBlock(new Uint8Array(10).fill(3))]);
    const rootlessCid = await rawCidOf(rootless);
    expect((await putShard(id, sa, rootlessCid.toString(), rootless)).json).toEqual({
      blocks: 1,
      bytes: 10,
      received_total: 2958,
    });
  });

  it('a shard of thousands of tiny blocks, one named twice far apart, is stored whole, and nothing is left staged', async () => {
    const blocks = await Promise.all(
      Array.from({ length: 5000 }, (_, index) => rawBlock(Buffer.from(`tiny ${index}`))),
    );
    const total = blocks.reduce((sum, block) => sum + block.bytes.length, 0);
    // A user of its own: the reads below count toward the user's egress.
    const cleo = await enrolledDevice(service, 'cleo@example.org');
    const { id, sa } = await pending(cleo, total, 'tiny-blocks');
    // The tenth block again after all the others: the host takes a shard's blocks in batches.
    const named = [...blocks, blocks[9] ?? blocks[0]].filter((block) => block !== undefined);
    const stored = await uploadShard(service, sa, id, named);
    expect(stored.json).toEqual({ blocks: 5000, bytes: total, received_total: total });
    const sample = [...blocks.slice(0, 50), ...blocks.slice(-50)];
    const missing = await call('POST', `${service.api}/blocks/missing`, {
      token: sa,
      json: sample.map((block) => block.cid.toString()),
    });
    expect(missing.json).toEqual([]);
    expect((await complete(service, sa, id)).status).toBe(200);
    for (const block of [blocks[0], blocks[9], blocks[4999]]) {
      if (!block) throw new Error('no block');
      const read = await call('GET', `${service.api}/blocks/${block.cid.toString()}`, {
        token: cleo.token(),
      });
      expect(Buffer.from(read.bytes).toString()).toBe(Buffer.from(block.bytes).toString());
    }
    // The blocks staged while the shard streamed in are gone with it.
    expect(stagedTables()).toEqual([]);
  });

  it('32: a shard for a version that is not pending is 409 before its body is read', async () => {
    const bucketId = await createBucket(service, ann, 's32b');
    const versionId = await storeVersion(service, ann, bucketId, null, []);
    const pushed = await push(service, ann, {
      bucketId,
      expectedDataSize: 100,
      previousId: versionId,
    });
    const sa = pushed.json.storage_authorization as string;
    const block = await rawBlock(new Uint8Array(100));
    await uploadShard(service, sa, pushed.json.id, [block]);
    expect((await complete(service, sa, pushed.json.id)).status).toBe(200);
    const late = await uploadShard(service, sa, pushed.json.id, [
      await rawBlock(new Uint8Array(50)),
    ]);
    expect(late.status).toBe(409);
    expect(late.json.code).toBe('conflict');
  });

  it('32: the body limit and the per-block limit give 413; a wrong media type 415', async () => {
    const { id, sa } = await pending(ann, SMALL_LIMITS.shardBytes * 2, 's32c');
    const big = await rawBlock(new Uint8Array(SMALL_LIMITS.blockBytes + 1));
    const oversizedBlock = await uploadShard(service, sa, id, [big]);
    expect(oversizedBlock.status).toBe(413);
    const blocks = [];
    for (let i = 0; i < 5; i += 1)
      blocks.push(await rawBlock(new Uint8Array(SMALL_LIMITS.blockBytes).fill(i)));
    const tooLong = await uploadShard(service, sa, id, blocks);
    expect(tooLong.status).toBe(413);
    const shard = await shardOf([await rawBlock()]);
    const wrongType = await call('PUT', `${service.api}/upload/${id}/${shard.cid.toString()}`, {
      token: sa,
      body: shard.car,
      contentType: 'application/octet-stream',
    });
    expect(wrongType.status).toBe(415);
    const read = await call('GET', `${service.api}/buckets/metadata/${id}`, { token: ann.token() });
    expect(read.json.state).toBe('pending');
    const missing = await call('POST', `${service.api}/blocks/missing`, {
      token: sa,
      json: blocks.map((b) => b.cid.toString()),
    });
    expect(missing.json).toHaveLength(5);
  });

  it("33: expired, forged or another version's SA is 401; malformed path ids are 404", async () => {
    const first = await pending(ann, 1000, 's33a');
    const second = await pending(ann, 1000, 's33b');
    const block = await rawBlock(new Uint8Array(10));
    const shard = await shardOf([block]);
    expect((await putShard(first.id, second.sa, shard.cid.toString(), shard.car)).status).toBe(401);
    expect((await complete(service, second.sa, first.id)).status).toBe(401);
    // Accepted first, so a server that remembers verified tokens must still check the
    // signature of the forged one below, which has the same header and claims.
    expect(
      (
        await call('POST', `${service.api}/blocks/missing`, {
          token: first.sa,
          json: [block.cid.toString()],
        })
      ).status,
    ).toBe(200);
    const claims = JSON.parse(Buffer.from(first.sa.split('.')[1] ?? '', 'base64url').toString());
    const header = JSON.parse(Buffer.from(first.sa.split('.')[0] ?? '', 'base64url').toString());
    const forged = signCompactJws(
      header,
      claims,
      generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey,
    );
    expect((await putShard(first.id, forged, shard.cid.toString(), shard.car)).status).toBe(401);
    expect((await putShard(first.id, ann.token(), shard.cid.toString(), shard.car)).status).toBe(
      401,
    );
    expect((await putShard('NOT-A-UUID', first.sa, shard.cid.toString(), shard.car)).status).toBe(
      404,
    );
    expect(
      (
        await putShard(
          first.id,
          first.sa,
          'bafybeigchah33ydteomw44ndcz3drkvdu2bqulnucsvhcydzmftg62pumi',
          shard.car,
        )
      ).status,
    ).toBe(404);
    expect((await putShard(first.id, first.sa, 'nonsense', shard.car)).status).toBe(404);
    service.advance(61_000 + 21_000);
    expect((await putShard(first.id, first.sa, shard.cid.toString(), shard.car)).status).toBe(401);
  });

  it("34: blocks/missing lists exactly what the user lacks, hides other users' blocks and 404s for deleted versions", async () => {
    const held = await rawBlock();
    const bucketId = await createBucket(service, ann, 's34');
    await storeVersion(service, ann, bucketId, null, [held]);
    const bobsBlock = await rawBlock();
    const bobBucket = await createBucket(service, bob, 's34');
    await storeVersion(service, bob, bobBucket, null, [bobsBlock]);
    const next = await pending(ann, 5000, 's34-next');
    const fresh = await rawBlock();
    const cids = [fresh, held, bobsBlock, fresh].map((b) => b.cid.toString());
    const missing = await call('POST', `${service.api}/blocks/missing`, {
      token: next.sa,
      json: cids,
    });
    expect(missing.status).toBe(200);
    expect(missing.json).toEqual([fresh.cid.toString(), bobsBlock.cid.toString()]);
    expect(
      (await call('POST', `${service.api}/blocks/missing`, { token: next.sa, json: ['bad'] }))
        .status,
    ).toBe(400);
    // Near misses too: another spelling of a good CID, a CIDv0, a CID of another hash.
    const good = fresh.cid.toString();
    const lastBits = String.fromCharCode(good.charCodeAt(good.length - 1) + 1);
    for (const nearMiss of [
      good.toUpperCase(),
      `${good.slice(0, -1)}${lastBits}`,
      'QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG',
      'bafkr4ihkr4ld3m4gqkjf4reryxsy2s5tkbxprqkow6fin2iiyvreuzzab4',
    ]) {
      const refused = await call('POST', `${service.api}/blocks/missing`, {
        token: next.sa,
        json: [good, nearMiss],
      });
      expect([nearMiss, refused.status, refused.json?.msg]).toEqual([
        nearMiss,
        400,
        'body.1: must be a CIDv1 (base32, sha2-256)',
      ]);
    }
    await call('DELETE', `${service.api}/buckets/metadata/${next.id}`, { token: ann.token() });
    expect(
      (await call('POST', `${service.api}/blocks/missing`, { token: next.sa, json: [] })).status,
    ).toBe(404);
  });
});

describe('§18 reading blocks', () => {
  it("39: blocks/{cid} and blocks/car return the caller's blocks in request order, and 404 otherwise", async () => {
    const blocks = [await rawBlock(), await rawBlock(), await rawBlock()];
    const bucketId = await createBucket(service, ann, 's39');
    await storeVersion(service, ann, bucketId, null, blocks);
    const [first, second, third] = blocks as [
      (typeof blocks)[0],
      (typeof blocks)[0],
      (typeof blocks)[0],
    ];
    const single = await call('GET', `${service.api}/blocks/${second.cid.toString()}`, {
      token: ann.token(),
    });
    expect(single.status).toBe(200);
    expect(single.headers.get('content-type')).toBe('application/octet-stream');
    expect(single.headers.get('content-length')).toBe('1024');
    expect(Buffer.from(single.bytes).equals(Buffer.from(second.bytes))).toBe(true);
    expect(
      (await call('GET', `${service.api}/blocks/${second.cid.toString()}`, { token: bob.token() }))
        .status,
    ).toBe(404);
    const order = [third, first, third, second].map((b) => b.cid.toString());
    const car = await call('POST', `${service.api}/blocks/car`, {
      token: ann.token(),
      json: order,
    });
    expect(car.status).toBe(200);
    expect(car.headers.get('content-type')).toBe('application/vnd.ipld.car');
    const reader = await CarReader.fromBytes(car.bytes);
    expect((await reader.getRoots()).map(String)).toEqual([third.cid.toString()]);
    const got = [];
    for await (const block of reader.blocks()) got.push(block.cid.toString());
    expect(got).toEqual([third, first, second].map((b) => b.cid.toString()));
    const foreign = await call('POST', `${service.api}/blocks/car`, {
      token: bob.token(),
      json: order,
    });
    expect(foreign.status).toBe(404);
    // Named, so that a client need not search: only CIDs the caller sent.
    expect(foreign.json.msg).toBe(`${BLOCKS_NOT_HELD_MSG}: ${[...new Set(order)].join(' ')}`);
    // One CID the caller does not hold, after its own: the whole request is refused.
    const unheld = (await rawBlock()).cid.toString();
    const mixed = await call('POST', `${service.api}/blocks/car`, {
      token: ann.token(),
      json: [...order, unheld],
    });
    expect(mixed.status).toBe(404);
    expect(mixed.json).toEqual({ code: 'not_found', msg: `${BLOCKS_NOT_HELD_MSG}: ${unheld}` });
    expect(
      (await call('POST', `${service.api}/blocks/car`, { token: ann.token(), json: [] })).status,
    ).toBe(400);
    const user = await call('GET', `${service.api}/users/current`, { token: ann.token() });
    expect(user.json.monthly_egress).toBe(1024 + car.bytes.length);
  });
});

describe('a block damaged on the host', () => {
  it('cuts the blocks/car answer short instead of sending wrong bytes, counts no egress for it, and keeps serving', async () => {
    const { truncateSync } = await import('node:fs');
    const blocks = [await rawBlock(), await rawBlock()];
    const bucketId = await createBucket(service, ann, 'damaged');
    await storeVersion(service, ann, bucketId, null, blocks);
    const [first, second] = blocks as [(typeof blocks)[0], (typeof blocks)[0]];
    const egressBefore = (await call('GET', `${service.api}/users/current`, { token: ann.token() }))
      .json.monthly_egress as number;
    // Both blocks are in one pack, the second after the first: cut the pack inside the second.
    const stored = storedBlock(service.dataDir, second.cid.toString());
    if (!stored) throw new Error('the second block is not stored');
    truncateSync(stored.file, stored.offset + 100);
    await expect(
      call('POST', `${service.api}/blocks/car`, {
        token: ann.token(),
        json: [first.cid.toString(), second.cid.toString()],
      }),
    ).rejects.toThrow();
    const intact = await call('POST', `${service.api}/blocks/car`, {
      token: ann.token(),
      json: [first.cid.toString()],
    });
    expect(intact.status).toBe(200);
    const reader = await CarReader.fromBytes(intact.bytes);
    const got = [];
    for await (const block of reader.blocks()) got.push(block.cid.toString());
    expect(got).toEqual([first.cid.toString()]);
    const egressAfter = (await call('GET', `${service.api}/users/current`, { token: ann.token() }))
      .json.monthly_egress as number;
    expect(egressAfter - egressBefore).toBe(intact.bytes.length);
  });
});

describe('§11.6 usage', () => {
  it('counts each data block a user holds once, whatever shards, versions and users it is in', async () => {
    const quota = 1_000_000;
    const dave = await enrolledDevice(service, 'dave@example.org', quota);
    const erin = await enrolledDevice(service, 'erin@example.org');
    const carSize = (await metadataCar()).car.length;
    /** Passes when Dave's usage is `expected`: a push filling his quota to the byte fits, one byte more does not. */
    const probes = await createBucket(service, dave, 'usage-probes');
    async function expectUsage(expected: number): Promise<void> {
      const room = quota - expected - carSize;
      const over = await push(service, dave, {
        bucketId: probes,
        expectedDataSize: room + 1,
        previousId: null,
      });
      expect(over.json.code).toBe('quota_exceeded');
      const fits = await push(service, dave, {
        bucketId: probes,
        expectedDataSize: room,
        previousId: null,
      });
      expect(fits.status).toBe(200);
      const probe = `${service.api}/buckets/metadata/${fits.json.id as string}`;
      expect((await call('DELETE', probe, { token: dave.token() })).status).toBe(204);
    }
    const [a, b, c, d] = await Promise.all(
      [1000, 2000, 3000, 4000].map((size) => rawBlock(randomBytes(size))),
    );
    if (!a || !b || !c || !d) throw new Error('no blocks');

    // One version, its blocks over two shards that share one; a block twice in one shard.
    const photos = await createBucket(service, dave, 'usage-photos');
    const pushed = await push(service, dave, {
      bucketId: photos,
      expectedDataSize: 6000,
      previousId: null,
    });
    const id = pushed.json.id as string;
    const sa = pushed.json.storage_authorization as string;
    expect((await uploadShard(service, sa, id, [a, b, a])).json).toEqual({
      blocks: 2,
      bytes: 3000,
      received_total: 3000,
    });
    expect((await uploadShard(service, sa, id, [b, c])).json).toEqual({
      blocks: 2,
      bytes: 5000,
      received_total: 6000,
    });
    expect((await complete(service, sa, id)).status).toBe(200);
    await expectUsage(6000 + carSize);

    // A second bucket holding a block Dave holds already adds it to its own set, not to usage.
    const documents = await createBucket(service, dave, 'usage-documents');
    await storeVersion(service, dave, documents, null, [a, d]);
    await expectUsage(10_000 + 2 * carSize);

    // Another user storing one of Dave's blocks leaves Dave's usage as it was.
    const erinBucket = await createBucket(service, erin, 'usage-erin');
    await storeVersion(service, erin, erinBucket, null, [c]);
    await expectUsage(10_000 + 2 * carSize);

    // Without the first bucket Dave holds a and d; c stays readable for Erin.
    expect(
      (await call('DELETE', `${service.api}/buckets/${photos}`, { token: dave.token() })).status,
    ).toBe(204);
    await expectUsage(5000 + carSize);
    const read = await call('GET', `${service.api}/blocks/${c.cid.toString()}`, {
      token: erin.token(),
    });
    expect(Buffer.from(read.bytes).equals(Buffer.from(c.bytes))).toBe(true);
  });
});

/** Waits until the shard streaming in has `count` blocks recorded (IncomingBlocks). */
async function recordedBlocks(count: number): Promise<void> {
  const db = service.service.ctx.db;
  for (let waited = 0; waited < 5000; waited += 10) {
    const tables = db
      .prepare("SELECT name FROM temp.sqlite_master WHERE name LIKE 'shard_%_arrivals'")
      .all() as Array<{ name: string }>;
    const recorded = tables.reduce(
      (sum, { name }) =>
        sum + (db.prepare(`SELECT COUNT(*) AS n FROM temp.${name}`).get() as { n: number }).n,
      0,
    );
    if (recorded >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`the shard's first ${count} blocks were not recorded within 5 s`);
}

/**
 * PUTs a shard whose body is sent in two parts, running `between` after the first: what a
 * slow link does to a large shard.
 */
function putInTwoParts(
  url: string,
  token: string,
  parts: readonly [Uint8Array, Uint8Array],
  between: () => Promise<void>,
): Promise<{ status: number; json: { code?: string; blocks?: number } }> {
  const [first, rest] = parts;
  const sent = request(url, {
    method: 'PUT',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/vnd.ipld.car',
      'content-length': first.length + rest.length,
    },
  });
  const answered = new Promise<{ status: number; json: { code?: string; blocks?: number } }>(
    (resolve, reject) => {
      sent.on('error', reject);
      sent.on('response', (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString() || '{}') as { code?: string },
          }),
        );
      });
    },
  );
  sent.write(first);
  return between().then(() => {
    sent.end(rest);
    return answered;
  });
}

/** How many blocks uploads in flight keep from garbage collection. */
function uploadPins(): number {
  return (
    service.service.ctx.db.prepare('SELECT COUNT(*) AS n FROM upload_pins').get() as { n: number }
  ).n;
}

/**
 * The blocks garbage collection would take now in another process serving the same folder
 * (another `canopy` command's embedded service): a connection of its own, rolled back.
 */
function collectableElsewhere(): string[] {
  const other = openDatabase(path.join(service.dataDir, 'service.sqlite'));
  const rollback = new Error('rollback');
  let taken: string[] = [];
  try {
    other
      .transaction(() => {
        taken = takeUnheldBlocks(other, 10_000).map((block) => block.cid);
        throw rollback;
      })
      .immediate();
  } catch (error) {
    if (error !== rollback) throw error;
  } finally {
    other.close();
  }
  return taken;
}

describe('a stored block named by a shard streaming in', () => {
  /** Ann holds `held`; Bob's shard names it, then a block of a whole MiB, and one more. */
  async function shardNamingAnnsBlock(name: string) {
    const held = await rawBlock();
    const annBucket = await createBucket(service, ann, `${name}-ann`);
    await storeVersion(service, ann, annBucket, null, [held]);
    const large = await rawBlock(randomBytes(SMALL_LIMITS.blockBytes));
    const last = await rawBlock();
    const blocks = [held, large, last];
    const total = blocks.reduce((sum, block) => sum + block.bytes.length, 0);
    const { id, sa } = await pending(bob, total, `${name}-bob`);
    const shard = await shardOf(blocks);
    const car = Buffer.from(shard.car);
    const split = car.indexOf(Buffer.from(large.bytes)) + large.bytes.length;
    return {
      held,
      blocks,
      total,
      id,
      sa,
      annBucket,
      url: `${service.api}/upload/${id}/${shard.cid.toString()}`,
      parts: [car.subarray(0, split), car.subarray(split)] as const,
    };
  }

  const deleteBucket = async (bucketId: string): Promise<void> => {
    const deleted = await call('DELETE', `${service.api}/buckets/${bucketId}`, {
      token: ann.token(),
    });
    expect(deleted.status).toBe(204);
  };

  it('stays stored for the shard when its other holder lets it go meanwhile, and the shard is stored whole', async () => {
    const { held, blocks, total, id, sa, annBucket, url, parts } =
      await shardNamingAnnsBlock('pinned');
    // The host found `held` stored as the first MiB came in, and wrote no copy of it. Ann's
    // bucket goes meanwhile, and with it her hold on the block.
    const stored = await putInTwoParts(url, sa, parts, async () => {
      await recordedBlocks(2);
      await deleteBucket(annBucket);
      expect(storedBlock(service.dataDir, held.cid.toString())).toBeDefined();
      expect(collectableElsewhere()).not.toContain(held.cid.toString());
    });
    expect(stored).toMatchObject({
      status: 200,
      json: { blocks: 3, bytes: total, received_total: total },
    });
    expect(uploadPins()).toBe(0);
    expect(stagedTables()).toEqual([]);
    expect((await complete(service, sa, id)).status).toBe(200);
    for (const block of blocks) {
      const read = await call('GET', `${service.api}/blocks/${block.cid.toString()}`, {
        token: bob.token(),
      });
      expect(Buffer.from(read.bytes).equals(Buffer.from(block.bytes))).toBe(true);
    }
  });

  it('is collected once the shard is cut off, and the shard sent again is stored whole', async () => {
    const { held, blocks, total, id, sa, annBucket, url, parts } =
      await shardNamingAnnsBlock('cut-off');
    const cutOff = request(url, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${sa}`,
        'content-type': 'application/vnd.ipld.car',
        'content-length': parts[0].length + parts[1].length,
      },
    });
    const ended = new Promise<void>((resolve) => {
      cutOff.on('error', () => resolve());
      cutOff.on('response', () => resolve());
    });
    cutOff.write(parts[0]);
    await recordedBlocks(2);
    expect(uploadPins()).toBe(1);
    cutOff.destroy();
    await ended;
    for (let waited = 0; uploadPins() > 0 && waited < 5000; waited += 10)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(uploadPins()).toBe(0);
    await deleteBucket(annBucket);
    expect(storedBlock(service.dataDir, held.cid.toString())).toBeUndefined();

    const again = await putInTwoParts(url, sa, parts, () => Promise.resolve());
    expect(again.json).toEqual({ blocks: 3, bytes: total, received_total: total });
    expect((await complete(service, sa, id)).status).toBe(200);
    for (const block of blocks)
      expect(storedBlock(service.dataDir, block.cid.toString())).toBeDefined();
  });
});

describe('garbage collection', () => {
  it('forgets a block once no user holds it, and keeps one another user still holds', async () => {
    const shared = await rawBlock();
    const own = await rawBlock();
    const annBucket = await createBucket(service, ann, 'gc-ann');
    await storeVersion(service, ann, annBucket, null, [shared, own]);
    const bobBucket = await createBucket(service, bob, 'gc-bob');
    await storeVersion(service, bob, bobBucket, null, [shared]);
    const stored = (block: typeof own) => storedBlock(service.dataDir, block.cid.toString());
    expect(stored(own)).toBeDefined();
    expect(
      (await call('DELETE', `${service.api}/buckets/${annBucket}`, { token: ann.token() })).status,
    ).toBe(204);
    expect(stored(own)).toBeUndefined();
    expect(stored(shared)).toBeDefined();
    const read = await call('GET', `${service.api}/blocks/${shared.cid.toString()}`, {
      token: bob.token(),
    });
    expect(Buffer.from(read.bytes).equals(Buffer.from(shared.bytes))).toBe(true);
    expect(
      (await call('GET', `${service.api}/blocks/${shared.cid.toString()}`, { token: ann.token() }))
        .status,
    ).toBe(404);
  });
});
