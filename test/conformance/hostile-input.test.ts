import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http-client.ts';
import { storeFiles } from '../helpers/stored-blocks.ts';
import { carBytes, rawBlock, type Block } from '../helpers/cars.ts';
import { createBucket, enrolledDevice, push } from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, SMALL_LIMITS, type TestService } from '../helpers/test-service.ts';
import { encodeVarint, rawCidOf } from '../../main/protocol/index.ts';
import * as dagCbor from '@ipld/dag-cbor';

// A corpus of hostile shards and bodies. Each case asserts the exact status and code, and that
// nothing was stored: no pack or staged file, no change to the version's received_total.

let service: TestService;
let ann: TestDevice;
let versionId = '';
let sa = '';
let good: Block;

/** Every file the block store holds: packs, and staged files a refused shard must not leave. */
function storedBlockFiles(): string[] {
  return [
    ...storeFiles(service.dataDir, 'packs'),
    ...storeFiles(service.dataDir, 'staging'),
    ...storeFiles(service.dataDir, 'blocks'),
  ];
}

beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
  const bucketId = await createBucket(service, ann, 'hostile');
  const pushed = await push(service, ann, {
    bucketId,
    expectedDataSize: 1_000_000,
    previousId: null,
  });
  versionId = pushed.json.id;
  sa = pushed.json.storage_authorization;
  good = await rawBlock();
});
afterAll(async () => service.close());

function section(cidBytes: Uint8Array, data: Uint8Array): Uint8Array {
  return Buffer.concat([encodeVarint(cidBytes.length + data.length), cidBytes, data]);
}

function header(roots: unknown[]): Uint8Array {
  const bytes = dagCbor.encode({ version: 1, roots });
  return Buffer.concat([encodeVarint(bytes.length), bytes]);
}

async function cases(): Promise<
  Array<{ name: string; body: Uint8Array; status: number; code: string }>
> {
  const valid = await carBytes([good.cid], [good]);
  const other = await rawBlock();
  const lying = section(other.cid.bytes, good.bytes);
  const v0 = Buffer.from([0x12, 0x20, ...new Uint8Array(32)]);
  return [
    { name: 'empty body', body: new Uint8Array(0), status: 400, code: 'invalid_request' },
    {
      name: 'truncated CAR',
      body: valid.subarray(0, valid.length - 100),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'trailing partial section',
      body: Buffer.concat([valid, Buffer.from([0x05, 0x01])]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a lying block',
      body: Buffer.concat([header([good.cid]), lying]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'an oversized varint',
      body: Buffer.concat([
        header([]),
        Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
      ]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a section claiming 2^40 bytes',
      body: Buffer.concat([header([]), encodeVarint(2 ** 40), good.cid.bytes]),
      status: 413,
      code: 'payload_too_large',
    },
    {
      name: 'a header claiming 1 GiB',
      body: Buffer.concat([encodeVarint(2 ** 30), Buffer.alloc(10)]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a header that is not CBOR',
      body: Buffer.concat([encodeVarint(4), Buffer.from('junk')]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'CAR version 2 where v1 is required',
      body: Buffer.concat([
        encodeVarint(11),
        Buffer.from('a16776657273696f6e02', 'hex'),
        Buffer.alloc(40),
      ]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a CIDv0 block',
      body: Buffer.concat([header([]), section(v0, good.bytes)]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a sha-512 CID',
      body: Buffer.concat([
        header([]),
        section(Buffer.from([0x01, 0x55, 0x13, 0x40, ...new Uint8Array(64)]), good.bytes),
      ]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a zero-length section',
      body: Buffer.concat([header([]), Buffer.from([0x00])]),
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a block over the block limit',
      body: await carBytes([], [await rawBlock(new Uint8Array(SMALL_LIMITS.blockBytes + 1))]),
      status: 413,
      code: 'payload_too_large',
    },
  ];
}

describe('hostile shards', () => {
  it('each malformed shard gets its exact error and stores nothing', async () => {
    for (const hostile of await cases()) {
      const before = storedBlockFiles();
      const shardCid = (await rawCidOf(hostile.body)).toString();
      const response = await call('PUT', `${service.api}/upload/${versionId}/${shardCid}`, {
        token: sa,
        body: hostile.body,
        contentType: 'application/vnd.ipld.car',
      });
      expect({ name: hostile.name, status: response.status, code: response.json?.code }).toEqual({
        name: hostile.name,
        status: hostile.status,
        code: hostile.code,
      });
      expect(storedBlockFiles()).toEqual(before);
      // Nor does the refused shard leave its blocks staged in the database's temporary tables.
      expect(service.service.ctx.db.prepare('SELECT name FROM temp.sqlite_master').all()).toEqual(
        [],
      );
      const version = await call('GET', `${service.api}/buckets/metadata/${versionId}`, {
        token: ann.token(),
      });
      expect(version.json.state).toBe('pending');
    }
    const missing = await call('POST', `${service.api}/blocks/missing`, {
      token: sa,
      json: [good.cid.toString()],
    });
    expect(missing.json).toEqual([good.cid.toString()]);
  });

  it('a body larger than the shard limit is refused from its Content-Length', async () => {
    const response = await call(
      'PUT',
      `${service.api}/upload/${versionId}/${good.cid.toString()}`,
      {
        token: sa,
        body: new Uint8Array(SMALL_LIMITS.shardBytes + 1),
        contentType: 'application/vnd.ipld.car',
      },
    );
    expect(response.status).toBe(413);
  });
});

describe('hostile JSON', () => {
  it('wrong types, nested junk and oversized bodies get 400 or 413 and change nothing', async () => {
    const url = `${service.api}/buckets`;
    const bodies: Array<[unknown, number]> = [
      [[], 400],
      ['string', 400],
      [null, 400],
      [
        { name: { $gt: '' }, type: 'backup', storage_class: 'hot', initial_bucket_key_pem: 'x' },
        400,
      ],
      [{ name: ['a'], type: 'backup', storage_class: 'hot', initial_bucket_key_pem: 'x' }, 400],
    ];
    for (const [json, status] of bodies) {
      expect((await call('POST', url, { token: ann.token(), json })).status).toBe(status);
    }
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    expect(
      (await call('POST', url, { token: ann.token(), body: deep, contentType: 'application/json' }))
        .status,
    ).toBe(400);
    expect(
      (
        await call('POST', url, {
          token: ann.token(),
          body: '{"name": "x"',
          contentType: 'application/json',
        })
      ).status,
    ).toBe(400);
    const huge = JSON.stringify({ name: 'x'.repeat(SMALL_LIMITS.jsonBodyBytes) });
    const tooBig = await call('POST', url, {
      token: ann.token(),
      body: huge,
      contentType: 'application/json',
    });
    expect(tooBig.status).toBe(413);
    expect(tooBig.json.code).toBe('payload_too_large');
    const utf16 = await call('POST', url, {
      token: ann.token(),
      body: '{}',
      contentType: 'application/json; charset=utf-16',
    });
    expect(utf16.status).toBe(415);
    expect(
      (await call('GET', url, { token: ann.token() })).json.map((b: { name: string }) => b.name),
    ).toEqual(['hostile']);
  });
});
