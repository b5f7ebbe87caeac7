import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CarReader } from '@ipld/car';
import { EngineError } from '../../main/api/index.ts';
import type { MetadataUploadResult } from '../../main/protocol/index.ts';
import { loadOrCreateKeyPair, TokenMinter, FileSecretStore } from '../../main/identity/index.ts';
import { ServiceClient, TransferRateLimit } from '../../main/service/index.ts';
import { metadataCar, rawBlock, shardOf } from '../helpers/cars.ts';
import { newPem } from '../helpers/flows.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The engine's typed service client against the real server: every method, and the error
// codes a caller branches on.

let service: TestService;
let home: string;
let client: ServiceClient;
let userId = '';

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  await expect(promise).rejects.toSatisfy(
    (error: unknown) => error instanceof EngineError && error.code === code,
  );
}

beforeAll(async () => {
  service = await startTestService({ regwaitHoldMs: 200 });
  home = mkdtempSync(path.join(os.tmpdir(), 'canopy-client-'));
  const secrets = new FileSecretStore(home);
  const key = await loadOrCreateKeyPair(secrets, 'device');
  const { code } = service.addUser('ann@example.org', 10_000_000);
  const anonymous = new ServiceClient({ baseUrl: service.url });
  const enrolled = await anonymous.enroll({ code, pem: key.pem, deviceName: 'laptop' });
  userId = enrolled.user_id;
  const minter = new TokenMinter(key, userId);
  client = new ServiceClient({ baseUrl: service.url, deviceToken: () => minter.token() });
});
afterAll(async () => {
  await service.close();
  rmSync(home, { recursive: true, force: true });
});

/** A new backup bucket named `name`, with a version pushed to it that awaits its 1 MB of data. */
async function pendingVersionIn(name: string): Promise<MetadataUploadResult> {
  const bucket = await client.createBucket({
    name,
    type: 'backup',
    storageClass: 'hot',
    bucketKeyPem: newPem(),
  });
  const metadata = await metadataCar();
  return client.pushVersion({
    bucketId: bucket.id,
    rootCid: metadata.root.toString(),
    metadataCid: metadata.cid.toString(),
    expectedDataSize: 1_000_000,
    previousId: null,
    validKeys: [],
    deletedBlockCids: [],
    car: metadata.car,
  });
}

describe('ServiceClient', () => {
  it('covers identity, device keys and regwait', async () => {
    const who = await client.whoAmI();
    expect(who).toMatchObject({
      user_id: userId,
      email: 'ann@example.org',
      storage_host: service.url,
    });
    const code = await client.createEnrollmentCode();
    expect(code.code).toMatch(/^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}$/);
    const pem = newPem();
    const added = await client.addDeviceKey({ pem, name: 'phone' });
    expect((await client.listDeviceKeys()).map((key) => key.id)).toContain(added.id);
    expect((await client.getDeviceKey(added.id)).name).toBe('phone');
    expect(await client.pollRegistration(added.fingerprint)).toBe(userId);
    await client.deleteDeviceKey(added.id);
    expect(await client.pollRegistration(added.fingerprint)).toBeNull();
    await expectCode(client.getDeviceKey(added.id), 'not_found');
  });

  it('covers buckets, versions, the storage host and snapshots', async () => {
    const created = await client.createBucket({
      name: 'Photos',
      type: 'backup',
      storageClass: 'hot',
      bucketKeyPem: newPem(),
    });
    await expectCode(
      client.createBucket({
        name: 'Photos',
        type: 'backup',
        storageClass: 'hot',
        bucketKeyPem: newPem(),
      }),
      'conflict',
    );
    await client.updateBucket(created.id, { replicas: 2 });
    expect((await client.getBucket(created.id)).replicas).toBe(2);
    const block = await rawBlock();
    const metadata = await metadataCar();
    const pushed = await client.pushVersion({
      bucketId: created.id,
      rootCid: metadata.root.toString(),
      metadataCid: metadata.cid.toString(),
      expectedDataSize: block.bytes.length,
      previousId: null,
      validKeys: [],
      deletedBlockCids: [],
      car: metadata.car,
    });
    expect(pushed.state).toBe('pending');
    expect(
      await client.missingBlocks(pushed.storage_host, pushed.storage_authorization, [
        block.cid.toString(),
      ]),
    ).toEqual([block.cid.toString()]);
    const shard = await shardOf([block]);
    const stored = await client.uploadShard(
      pushed.storage_host,
      pushed.storage_authorization,
      pushed.id,
      shard.cid.toString(),
      shard.car,
    );
    expect(stored).toEqual({ blocks: 1, bytes: 1024, received_total: 1024 });
    const active = await client.completeVersion(
      pushed.storage_host,
      pushed.storage_authorization,
      pushed.id,
    );
    expect(active.state).toBe('active');
    expect((await client.listVersions(created.id)).map((v) => v.id)).toEqual([pushed.id]);
    expect((await client.getVersion(pushed.id)).snapshot_id).toEqual(expect.any(String));
    expect(Buffer.from(await client.pullVersion(pushed.id)).equals(Buffer.from(metadata.car))).toBe(
      true,
    );
    expect(
      Buffer.from(await client.getBlock(pushed.storage_host, block.cid.toString())).equals(
        Buffer.from(block.bytes),
      ),
    ).toBe(true);
    const chunks: Uint8Array[] = [];
    for await (const chunk of await client.blocksCar(pushed.storage_host, [block.cid.toString()]))
      chunks.push(chunk);
    const reader = await CarReader.fromBytes(Buffer.concat(chunks));
    expect((await reader.get(block.cid))?.bytes).toEqual(block.bytes);
    const snapshots = await client.listSnapshots(created.id);
    expect(snapshots).toHaveLength(1);
    expect((await client.getSnapshot(created.id, snapshots[0]?.id ?? '')).metadata_id).toBe(
      pushed.id,
    );
    await expectCode(client.deleteVersion(pushed.id), 'conflict');
    await client.deleteSnapshot(created.id, snapshots[0]?.id ?? '');
    const stale = client.pushVersion({
      bucketId: created.id,
      rootCid: metadata.root.toString(),
      metadataCid: metadata.cid.toString(),
      expectedDataSize: 0,
      previousId: null,
      validKeys: [],
      deletedBlockCids: [],
      car: metadata.car,
    });
    await expectCode(stale, 'stale_previous');
    const tooBig = client.pushVersion({
      bucketId: created.id,
      rootCid: metadata.root.toString(),
      metadataCid: metadata.cid.toString(),
      expectedDataSize: 20_000_000,
      previousId: pushed.id,
      validKeys: [],
      deletedBlockCids: [],
      car: metadata.car,
    });
    await expectCode(tooBig, 'quota_exceeded');
    const interactive = await client.createBucket({
      name: 'Scratch',
      type: 'interactive',
      storageClass: 'cold',
      bucketKeyPem: newPem(),
    });
    const empty = await client.pushVersion({
      bucketId: interactive.id,
      rootCid: metadata.root.toString(),
      metadataCid: metadata.cid.toString(),
      expectedDataSize: 0,
      previousId: null,
      validKeys: [],
      deletedBlockCids: [],
      car: metadata.car,
    });
    expect((await client.snapshotVersion(empty.id)).state).toBe('completed');
    await client.deleteBucket(interactive.id);
    await expectCode(client.getBucket(interactive.id), 'not_found');
  });

  it('paces the shards and metadata it streams, and the blocks it fetches, when paced by limits', async () => {
    const bucket = await client.createBucket({
      name: 'Paced',
      type: 'backup',
      storageClass: 'hot',
      bucketKeyPem: newPem(),
    });
    const blocks = await Promise.all(
      Array.from({ length: 40 }, () => rawBlock(randomBytes(10_000))),
    );
    const shard = await shardOf(blocks);
    const metadata = await metadataCar();
    const files = mkdtempSync(path.join(os.tmpdir(), 'canopy-paced-'));
    const shardFile = path.join(files, 'shard.car');
    const metadataFile = path.join(files, 'metadata.car');
    writeFileSync(shardFile, shard.car);
    writeFileSync(metadataFile, metadata.car);
    // A clock that moves only as the limit waits: the pace is counted, not timed.
    const clock = {
      ms: 0,
      now: () => clock.ms,
      wait: async (ms: number) => {
        clock.ms += ms;
        await Promise.resolve();
      },
    };
    const paced = client.pacedBy({ upload: new TransferRateLimit(100_000, clock) });
    // What the progress is told: each count, with the clock when it was told.
    const pushSent: number[] = [];
    const shardSent: { bytes: number; atMs: number }[] = [];
    try {
      const pushed = await paced.pushVersion({
        bucketId: bucket.id,
        rootCid: metadata.root.toString(),
        metadataCid: metadata.cid.toString(),
        expectedDataSize: 400_000,
        previousId: null,
        validKeys: [],
        deletedBlockCids: [],
        car: {
          file: metadataFile,
          bytes: metadata.car.length,
          onSent: (sent) => pushSent.push(sent),
        },
      });
      // The CAR's own bytes, not the multipart body's around them.
      expect(pushSent.at(-1)).toBe(metadata.car.length);
      const pushedAt = clock.ms;
      const stored = await paced.uploadShard(
        pushed.storage_host,
        pushed.storage_authorization,
        pushed.id,
        shard.cid.toString(),
        {
          file: shardFile,
          bytes: shard.car.length,
          onSent: (sent) => shardSent.push({ bytes: sent, atMs: clock.ms }),
        },
      );
      expect(stored).toMatchObject({ blocks: 40, bytes: 400_000 });
      // At 100 kB a second, in pieces of 16 KiB: the shard's last piece went out once those
      // before it had taken their time, and not before.
      const lastPiece = shard.car.length % (16 << 10) || 16 << 10;
      expect(clock.ms).toBeGreaterThanOrEqual(pushedAt + (shard.car.length - lastPiece) / 100);
      expect(clock.ms).toBeLessThan(pushedAt + shard.car.length / 100);
      // Counted as sent only as the limit lets the bytes go, not as they were read ahead.
      expect(shardSent.at(-1)?.bytes).toBe(shard.car.length);
      for (const told of shardSent)
        expect(told.atMs).toBeGreaterThanOrEqual(pushedAt + (told.bytes - (16 << 10)) / 100);
      expect(
        (await paced.completeVersion(pushed.storage_host, pushed.storage_authorization, pushed.id))
          .state,
      ).toBe('active');

      // Fetched again through a client paced at 200 kB a second the other way: the blocks come
      // whole, each piece taken once those before it took their time.
      const down = client.pacedBy({ download: new TransferRateLimit(200_000, clock) });
      const fetchedFrom = clock.ms;
      const received: Uint8Array[] = [];
      let lastPieceAt = fetchedFrom;
      const answer = await down.blocksCar(
        pushed.storage_host,
        blocks.map((block) => block.cid.toString()),
      );
      for await (const piece of answer) {
        expect(piece.length).toBeLessThanOrEqual(16 << 10);
        lastPieceAt = clock.ms;
        received.push(piece);
      }
      const car = Buffer.concat(received);
      const reader = await CarReader.fromBytes(car);
      for (const block of blocks) expect((await reader.get(block.cid))?.bytes).toEqual(block.bytes);
      expect(lastPieceAt - fetchedFrom).toBeGreaterThanOrEqual((car.length - (16 << 10)) / 200);
    } finally {
      rmSync(files, { recursive: true, force: true });
    }
  });

  it('stops a paced upload at once, closing what its body reads', async () => {
    const pushed = await pendingVersionIn('Stopped');
    // A limit whose second wait lasts until the request ends; the body a shard's source.
    let waits = 0;
    const limit = new TransferRateLimit(1000, {
      now: () => 0,
      wait: (_ms, signal) =>
        new Promise((resolve, reject) => {
          waits += 1;
          if (waits === 1) resolve();
          signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
        }),
    });
    // A whole shard the host reads as it comes, until the body is cut off, 16 KiB a pull.
    const shard = await shardOf(
      await Promise.all(Array.from({ length: 90 }, () => rawBlock(randomBytes(10_000)))),
    );
    let pulls = 0;
    let bodyClosed = false;
    let bodies = 0;
    const body = (): ReadableStream<Uint8Array> => {
      bodies += 1;
      let offset = 0;
      return new ReadableStream({
        pull: (controller) => {
          pulls += 1;
          controller.enqueue(shard.car.subarray(offset, offset + (16 << 10)));
          offset += 16 << 10;
        },
        cancel: () => {
          bodyClosed = true;
        },
      });
    };
    const stop = new AbortController();
    const upload = client
      .stoppedBy(stop.signal)
      .pacedBy({ upload: limit })
      .uploadShard(
        pushed.storage_host,
        pushed.storage_authorization,
        pushed.id,
        shard.cid.toString(),
        { stream: body, bytes: shard.car.length },
      );
    // The first piece goes at once, the second after the first wait, the third waits on.
    await vi.waitFor(() => expect(waits).toBe(2));
    stop.abort();
    await expectCode(upload, 'stopped');
    await vi.waitFor(() => expect(bodyClosed).toBe(true));
    const pulled = pulls;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(pulls).toBe(pulled);
    expect(bodies).toBe(1);
  });

  it('stops a paced fetch of blocks at once', async () => {
    const pushed = await pendingVersionIn('Fetched');
    const blocks = await Promise.all(
      Array.from({ length: 100 }, () => rawBlock(randomBytes(10_000))),
    );
    const shard = await shardOf(blocks);
    const { storage_host: host, storage_authorization: sa } = pushed;
    await client.uploadShard(host, sa, pushed.id, shard.cid.toString(), shard.car);
    await client.completeVersion(host, sa, pushed.id);
    // A limit whose first wait lasts until the fetch is stopped.
    let waiting = false;
    const limit = new TransferRateLimit(1000, {
      now: () => 0,
      wait: (_ms, signal) =>
        new Promise((_resolve, reject) => {
          waiting = true;
          signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
        }),
    });
    const stop = new AbortController();
    const answer = await client
      .stoppedBy(stop.signal)
      .pacedBy({ download: limit })
      .blocksCar(
        host,
        blocks.map((block) => block.cid.toString()),
      );
    const pieces: Uint8Array[] = [];
    const reading = (async () => {
      for await (const piece of answer) pieces.push(piece);
    })();
    await vi.waitFor(() => expect(waiting).toBe(true));
    stop.abort();
    await expect(reading).rejects.toThrow();
    expect(pieces).toHaveLength(1);
  });

  it("reads the host's answer to a shard it refuses before the body is all sent", async () => {
    const pushed = await pendingVersionIn('Refused');
    // Not a CAR: the host says so from the first bytes, while the rest is still to come.
    let bodies = 0;
    const notACar = (): ReadableStream<Uint8Array> => {
      bodies += 1;
      let pulls = 0;
      return new ReadableStream({
        pull: async (controller) => {
          pulls += 1;
          if (pulls > 1) await new Promise((resolve) => setTimeout(resolve, 20));
          if (pulls > 50) controller.close();
          else controller.enqueue(randomBytes(16 << 10));
        },
      });
    };
    const shardCid = (await shardOf([await rawBlock()])).cid.toString();
    const refused = client.uploadShard(
      pushed.storage_host,
      pushed.storage_authorization,
      pushed.id,
      shardCid,
      { stream: notACar, bytes: 50 * (16 << 10) },
    );
    // The host's own refusal, not a network failure tried again.
    await expect(refused).rejects.toSatisfy(
      (error: unknown) => error instanceof EngineError && error.code !== 'network',
    );
    expect(bodies).toBe(1);
  });

  it('covers the account', async () => {
    await client.updateUser({ display_name: 'Ann', locale: 'en-gb' });
    expect(await client.getUser()).toMatchObject({ display_name: 'Ann', locale: 'en-GB' });
    await expectCode(client.updateUser({ locale: '!!' }), 'invalid_request');
    expect(await client.listInvoices()).toEqual([]);
    await expectCode(client.getInvoice('0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d'), 'not_found');
    const notifications = await client.listNotifications();
    expect(notifications.map((n) => n.message_key)).toContain('device_key_added');
    await client.dismissNotification(notifications[0]?.id ?? '');
    expect((await client.listNotifications()).length).toBe(notifications.length - 1);
  });

  it('maps a revoked key to not_authorized and refuses plain http off this computer', async () => {
    const strangers = new ServiceClient({ baseUrl: service.url, deviceToken: () => 'a.b.c' });
    await expectCode(strangers.listBuckets(), 'not_authorized');
    expect(() => new ServiceClient({ baseUrl: 'http://backup.example.org' })).toThrow(
      /refusing plain http/,
    );
    expect(() => new ServiceClient({ baseUrl: 'ftp://backup.example.org' })).toThrow(EngineError);
    expect(new ServiceClient({ baseUrl: 'https://backup.example.org/' }).baseUrl).toBe(
      'https://backup.example.org',
    );
    expect(new ServiceClient({ baseUrl: 'http://127.0.0.2:9/' }).baseUrl).toBe(
      'http://127.0.0.2:9',
    );
  });
});
