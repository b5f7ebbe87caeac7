import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, truncateSync } from 'node:fs';
import path from 'node:path';
import { CarReader } from '@ipld/car';
import { call } from '../helpers/http-client.ts';
import { damageStoredBlock, storedBlock, storeFiles } from '../helpers/stored-blocks.ts';
import { rawBlock, type Block } from '../helpers/cars.ts';
import { createBucket, enrolledDevice, storeVersion } from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { findPack, releasePackBytes, sparsePacks } from '../../server/store/packs.ts';
import { findBlock } from '../../server/store/stored-blocks.ts';
import { BlockStore } from '../../server/blocks/block-store.ts';

// How the service keeps blocks on disk: a shard's new blocks in one pack file, packs freed when
// their blocks are collected, mostly dead packs rewritten, and block files of their own (from
// servers before packs) still served and collected.

let service: TestService;
let ann: TestDevice;
let bob: TestDevice;
beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
  bob = await enrolledDevice(service, 'bob@example.org');
});
afterAll(async () => service.close());

function stored(block: Block) {
  return storedBlock(service.dataDir, block.cid.toString());
}

async function readBack(device: TestDevice, block: Block, on = service): Promise<Buffer> {
  const single = await call('GET', `${on.api}/blocks/${block.cid.toString()}`, {
    token: device.token(),
  });
  expect(single.status).toBe(200);
  const car = await call('POST', `${on.api}/blocks/car`, {
    token: device.token(),
    json: [block.cid.toString()],
  });
  expect(car.status).toBe(200);
  const inCar = await (await CarReader.fromBytes(car.bytes)).get(block.cid);
  expect(Buffer.from(inCar?.bytes ?? []).equals(Buffer.from(single.bytes))).toBe(true);
  return Buffer.from(single.bytes);
}

/**
 * A pack on `on` of `deadBytes` of the owner's, in a bucket deleted since, and one small block
 * the keeper keeps (and `alsoKept`, in the same pack); returns the kept block.
 */
async function sparsePackOn(
  on: TestService,
  devices: { owner: TestDevice; keeper: TestDevice },
  name: string,
  deadBytes: number,
  alsoKept: Block[] = [],
): Promise<Block> {
  const kept = await rawBlock(new Uint8Array(1024).fill(deadBytes % 251));
  const dead = await rawBlock(new Uint8Array(deadBytes).fill(7));
  const ownBucket = await createBucket(on, devices.owner, `${name}-own`);
  await storeVersion(on, devices.owner, ownBucket, null, [dead, kept, ...alsoKept]);
  const keptBucket = await createBucket(on, devices.keeper, `${name}-kept`);
  await storeVersion(on, devices.keeper, keptBucket, null, [kept, ...alsoKept]);
  const deleted = await call('DELETE', `${on.api}/buckets/${ownBucket}`, {
    token: devices.owner.token(),
  });
  expect(deleted.status).toBe(204);
  return kept;
}

describe('pack files', () => {
  it("stores one shard's new blocks in one pack, each once, and reads each back byte for byte", async () => {
    const blocks = [
      await rawBlock(),
      await rawBlock(new Uint8Array(70_000).fill(9)),
      await rawBlock(new Uint8Array(1)),
    ];
    const bucketId = await createBucket(service, ann, 'one-pack');
    // The first block named again: the pack holds it once.
    await storeVersion(service, ann, bucketId, null, [...blocks, ...blocks.slice(0, 1)]);
    const places = blocks.map(stored);
    const packs = new Set(places.map((place) => place?.pack));
    expect(packs.size).toBe(1);
    const [pack] = packs;
    if (!pack) throw new Error('the blocks are not in a pack');
    expect(storeFiles(service.dataDir, 'packs')).toContain(`${pack}.pack`);
    expect(findPack(service.service.ctx.db, pack)).toMatchObject({
      bytes: 1024 + 70_000 + 1,
      live_bytes: 1024 + 70_000 + 1,
    });
    for (const block of blocks)
      expect((await readBack(ann, block)).equals(Buffer.from(block.bytes))).toBe(true);
  });

  it('answers blocks/car in the order asked, whether the blocks lie side by side in a pack or not', async () => {
    // Small blocks next to each other in one pack, three of 400 kB (more than a megabyte
    // together), and blocks of a second pack, asked for across and against the stored order.
    // The one-byte block is one no test here stored before: a random byte was the first test's
    // zero one time in 256, and a block stored before stays in the pack it went to then.
    const first: Block[] = [await rawBlock(Uint8Array.of(0xa5))];
    for (const size of [1000, 5000, 300, 400_000, 400_000, 400_000, 2000])
      first.push(await rawBlock(randomBytes(size)));
    const second = [await rawBlock(randomBytes(700)), await rawBlock(randomBytes(9000))];
    const bucketId = await createBucket(service, ann, 'adjacent');
    const firstId = await storeVersion(service, ann, bucketId, null, first);
    await storeVersion(service, ann, bucketId, firstId, second);
    const [a0, a1, a2, a3, a4, a5, a6, a7] = first;
    const [b0, b1] = second;
    if (!a0 || !a1 || !a2 || !a3 || !a4 || !a5 || !a6 || !a7 || !b0 || !b1)
      throw new Error('blocks missing');
    expect(stored(a1)?.pack).toBe(stored(a0)?.pack);
    expect(stored(b0)?.pack).not.toBe(stored(a0)?.pack);
    const asked = [a0, a2, a1, b0, a3, a4, a5, a6, a7, b1, a2];
    const answer = await call('POST', `${service.api}/blocks/car`, {
      token: ann.token(),
      json: asked.map((block) => block.cid.toString()),
    });
    expect(answer.status).toBe(200);
    const got: Array<{ cid: string; bytes: Buffer }> = [];
    for await (const block of (await CarReader.fromBytes(answer.bytes)).blocks())
      got.push({ cid: block.cid.toString(), bytes: Buffer.from(block.bytes) });
    // Each block once, in the order first asked for, with its own bytes.
    const expected = asked.slice(0, -1);
    expect(got.map((block) => block.cid)).toEqual(expected.map((block) => block.cid.toString()));
    for (const [index, block] of expected.entries())
      expect(got[index]?.bytes.equals(Buffer.from(block.bytes))).toBe(true);
  });

  it('rewrites a pack whose blocks were mostly collected, keeps the live block readable, and frees the pack once it is empty', async () => {
    const shared = await rawBlock(new Uint8Array(1024).fill(5));
    const own = await rawBlock(new Uint8Array(64 * 1024).fill(6));
    const annBucket = await createBucket(service, ann, 'compact-ann');
    await storeVersion(service, ann, annBucket, null, [own, shared]);
    const bobBucket = await createBucket(service, bob, 'compact-bob');
    await storeVersion(service, bob, bobBucket, null, [shared]);
    const before = stored(shared);
    if (!before?.pack) throw new Error('the shared block is not in a pack');
    expect(stored(own)?.pack).toBe(before.pack);

    expect(
      (await call('DELETE', `${service.api}/buckets/${annBucket}`, { token: ann.token() })).status,
    ).toBe(204);
    expect(stored(own)).toBeUndefined();
    // The sweep timer compacts too; either way, after this call the sparse pack is rewritten.
    await service.service.ctx.compactPacks();
    const after = stored(shared);
    expect(after?.pack).toBeDefined();
    expect(after?.pack).not.toBe(before.pack);
    expect(existsSync(before.file)).toBe(false);
    expect(findPack(service.service.ctx.db, before.pack)).toBeUndefined();
    expect((await readBack(bob, shared)).equals(Buffer.from(shared.bytes))).toBe(true);

    expect(
      (await call('DELETE', `${service.api}/buckets/${bobBucket}`, { token: bob.token() })).status,
    ).toBe(204);
    expect(stored(shared)).toBeUndefined();
    expect(existsSync(after?.file ?? '')).toBe(false);
    expect(
      (await call('GET', `${service.api}/blocks/${shared.cid.toString()}`, { token: bob.token() }))
        .status,
    ).toBe(404);
  });

  it('compacts the other packs when one cannot be read, and stops trying that one', async () => {
    // A service of its own whose sweep never runs: this test decides when compaction does.
    const quiet = await startTestService({ sweepIntervalMs: 3_600_000 });
    try {
      const owner = await enrolledDevice(quiet, 'owner@example.org');
      const keeper = await enrolledDevice(quiet, 'keeper@example.org');
      const where = (block: Block) => storedBlock(quiet.dataDir, block.cid.toString());
      const sparsePack = (name: string, deadBytes: number) =>
        sparsePackOn(quiet, { owner, keeper }, name, deadBytes);
      const onDamaged = await sparsePack('damaged', 200 * 1024);
      const onHealthy = await sparsePack('healthy', 100 * 1024);
      const damaged = where(onDamaged);
      const healthy = where(onHealthy);
      if (!damaged?.pack || !healthy?.pack) throw new Error('the blocks are not in packs');
      // The most wasteful pack, first in line, lost its bytes (a failing disk).
      truncateSync(damaged.file, 0);

      const ctx = quiet.service.ctx;
      await expect(ctx.compactPacks()).rejects.toThrow(
        new RegExp(`could not compact 1 pack\\(s\\), left as they are \\(${damaged.pack}: `),
      );
      expect(where(onHealthy)?.pack).not.toBe(healthy.pack);
      const read = await call('GET', `${quiet.api}/blocks/${onHealthy.cid.toString()}`, {
        token: keeper.token(),
      });
      expect(Buffer.from(read.bytes).equals(Buffer.from(onHealthy.bytes))).toBe(true);
      expect(where(onDamaged)?.pack).toBe(damaged.pack);
      // Left alone from now on, rather than failed again on every sweep.
      await expect(ctx.compactPacks()).resolves.toBe(0);
    } finally {
      await quiet.close();
    }
  });

  it('leaves a pack as it is when a block it would copy no longer matches its CID, until a client sends that block again', async () => {
    const quiet = await startTestService({ sweepIntervalMs: 3_600_000 });
    try {
      const owner = await enrolledDevice(quiet, 'owner@example.org');
      const keeper = await enrolledDevice(quiet, 'keeper@example.org');
      const sound = await rawBlock(new Uint8Array(1024).fill(1));
      const kept = await sparsePackOn(quiet, { owner, keeper }, 'rotten', 200 * 1024, [sound]);
      const cid = kept.cid.toString();
      // A bit flipped on the disk under the one block the compaction would keep.
      damageStoredBlock(quiet.dataDir, cid);
      const before = storedBlock(quiet.dataDir, cid);
      if (!before?.pack) throw new Error('the block is not in a pack');
      const packBytes = readFileSync(before.file);

      const ctx = quiet.service.ctx;
      const compaction = ctx.compactPacks();
      await expect(compaction).rejects.toThrow(
        new RegExp(`could not compact 1 pack\\(s\\), left as they are \\(${before.pack}: `),
      );
      await expect(compaction).rejects.toThrow(`block ${cid} no longer matches its CID`);
      // The file that may still be read right (its damage a misread) is kept, and used.
      expect(storedBlock(quiet.dataDir, cid)?.pack).toBe(before.pack);
      expect(readFileSync(before.file).equals(packBytes)).toBe(true);
      await expect(ctx.compactPacks()).resolves.toBe(0);

      // The keeper's client found it damaged (canopy verify) and sent it again: it lies in
      // another pack now, and the damaged pack, its other live block sound, is compacted.
      const keptBucket = await createBucket(quiet, keeper, 'rotten-again');
      await storeVersion(quiet, keeper, keptBucket, null, [kept]);
      expect(storedBlock(quiet.dataDir, cid)?.pack).not.toBe(before.pack);
      await expect(ctx.compactPacks()).resolves.toBe(1);
      expect(findPack(ctx.db, before.pack)).toBeUndefined();
      expect(existsSync(before.file)).toBe(false);
      expect(storedBlock(quiet.dataDir, sound.cid.toString())?.pack).not.toBe(before.pack);
      for (const block of [kept, sound])
        expect((await readBack(keeper, block, quiet)).equals(Buffer.from(block.bytes))).toBe(true);
    } finally {
      await quiet.close();
    }
  });

  it('tidies within its time: reports a pack it cannot rewrite, rewrites the others, and returns', async () => {
    // As the embedded service of one command does as it closes (cli/local-service.ts).
    const quiet = await startTestService({ sweepIntervalMs: 3_600_000 });
    try {
      const devices = {
        owner: await enrolledDevice(quiet, 'owner@example.org'),
        keeper: await enrolledDevice(quiet, 'keeper@example.org'),
      };
      const where = (block: Block) => storedBlock(quiet.dataDir, block.cid.toString());
      const onDamaged = await sparsePackOn(quiet, devices, 'damaged', 300 * 1024);
      const onHealthy = [
        await sparsePackOn(quiet, devices, 'first', 200 * 1024),
        await sparsePackOn(quiet, devices, 'second', 100 * 1024),
      ];
      const damaged = where(onDamaged);
      if (!damaged?.pack) throw new Error('the block is not in a pack');
      truncateSync(damaged.file, 0);
      const packsBefore = onHealthy.map((block) => where(block)?.pack);

      const failures: string[] = [];
      const ctx = quiet.service.ctx;
      ctx.onHousekeepingFailure = (error, what) => failures.push(`${what}: ${String(error)}`);
      await ctx.tidy(60_000);
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatch(new RegExp(`^compact packs: .*${damaged.pack}`));
      onHealthy.forEach((block, index) => {
        expect(where(block)?.pack).toBeDefined();
        expect(where(block)?.pack).not.toBe(packsBefore[index]);
      });
      for (const block of onHealthy) {
        const read = await call('GET', `${quiet.api}/blocks/${block.cid.toString()}`, {
          token: devices.keeper.token(),
        });
        expect(Buffer.from(read.bytes).equals(Buffer.from(block.bytes))).toBe(true);
      }
      // With no time at all, nothing is rewritten: a command's close never waits on it.
      await sparsePackOn(quiet, devices, 'later', 150 * 1024);
      const sparseBefore = sparsePacks(ctx.db, 0.5, 10);
      expect(sparseBefore).toHaveLength(2);
      await ctx.tidy(0);
      expect(sparsePacks(ctx.db, 0.5, 10)).toEqual(sparseBefore);
    } finally {
      await quiet.close();
    }
  });

  it('tidies no further once its database fails, saying so once for each step', async () => {
    const quiet = await startTestService({ sweepIntervalMs: 3_600_000 });
    const failures: string[] = [];
    const ctx = quiet.service.ctx;
    ctx.onHousekeepingFailure = (_error, what) => failures.push(what);
    // As a disk gone from under it: every statement fails from now on.
    ctx.db.close();
    try {
      await ctx.tidy(500);
      expect(failures).toEqual([
        'record expired upload windows',
        'delete blocks no one holds',
        'compact packs',
        'compact files of metadata chunks',
        "give the database's free pages back to the disk",
      ]);
    } finally {
      // Closing the service fails too, and says why, rather than pass over what it could not do.
      await expect(quiet.close()).rejects.toThrow('The database connection is not open');
    }
  });

  it("gives the database's free pages back to the disk in its sweep, when a deletion left many", async () => {
    const db = service.service.ctx.db;
    db.exec('CREATE TABLE filler (bytes BLOB)');
    const insert = db.prepare('INSERT INTO filler (bytes) VALUES (randomblob(4096))');
    db.transaction(() => {
      for (let row = 0; row < 3000; row += 1) insert.run();
    })();
    db.exec('DROP TABLE filler');
    const free = () => Number(db.pragma('freelist_count', { simple: true }));
    expect(free()).toBeGreaterThan(2500);
    // The sweep runs every 200 ms here.
    await expect.poll(free, { timeout: 5_000, interval: 100 }).toBeLessThan(100);
  });

  it('reads a block looked up before another process retired its pack, from the retired pack', async () => {
    // Two commands serve one data folder at once: one compacts (or frees) a pack between
    // another's looking up a block and its opening the pack.
    const block = await rawBlock(randomBytes(3000));
    const bucket = await createBucket(service, ann, 'retired-read');
    await storeVersion(service, ann, bucket, null, [block]);
    const db = service.service.ctx.db;
    const location = findBlock(db, block.cid.toString());
    if (!location?.pack) throw new Error('the block is not in a pack');
    const store = new BlockStore(service.dataDir);
    // The other process: no reader of its own is open, so the pack moves at once.
    store.retirePack(location.pack);
    expect(existsSync(store.packPath(location.pack))).toBe(false);

    const reader = service.service.ctx.blocks.openReader();
    try {
      expect((await reader.read(location)).equals(Buffer.from(block.bytes))).toBe(true);
    } finally {
      reader.close();
    }
    // Gone from both places: the pack's own place is named.
    store.dropRetired([`${location.pack}.pack`]);
    const late = service.service.ctx.blocks.openReader();
    try {
      await expect(late.read(location)).rejects.toThrow(store.packPath(location.pack));
    } finally {
      late.close();
    }
  });

  it('replaces a stored copy damaged on its disk when a shard brings the block again, and keeps sound ones', async () => {
    const damaged = await rawBlock(randomBytes(5000));
    // Most of their pack, so that compaction leaves it be once the damaged copy is dead.
    const sound = await rawBlock(randomBytes(60_000));
    const cutShort = await rawBlock(randomBytes(4000));
    const bucketId = await createBucket(service, ann, 'heal');
    // cutShort alone in a pack of its own, which is then cut short before it.
    const first = await storeVersion(service, ann, bucketId, null, [cutShort]);
    const second = await storeVersion(service, ann, bucketId, first, [damaged, sound]);
    const before = { damaged: stored(damaged), sound: stored(sound), cutShort: stored(cutShort) };
    if (!before.damaged?.pack || !before.cutShort?.pack) throw new Error('not in packs');
    damageStoredBlock(service.dataDir, damaged.cid.toString());
    truncateSync(before.cutShort.file, before.cutShort.offset + 10);
    expect((await readBack(ann, damaged)).equals(Buffer.from(damaged.bytes))).toBe(false);
    const liveBefore = findPack(service.service.ctx.db, before.damaged.pack)?.live_bytes ?? 0;

    // The same blocks again, as a client that found them damaged sends them.
    await storeVersion(service, ann, bucketId, second, [damaged, sound, cutShort]);
    expect((await readBack(ann, damaged)).equals(Buffer.from(damaged.bytes))).toBe(true);
    expect((await readBack(ann, cutShort)).equals(Buffer.from(cutShort.bytes))).toBe(true);
    const after = { damaged: stored(damaged), sound: stored(sound), cutShort: stored(cutShort) };
    expect(after.damaged?.pack).not.toBe(before.damaged.pack);
    expect(after.cutShort?.pack).toBe(after.damaged?.pack);
    // The sound copy is left where it was; the damaged one no longer counts as live.
    expect(after.sound).toEqual(before.sound);
    expect(findPack(service.service.ctx.db, before.damaged.pack)?.live_bytes).toBe(
      liveBefore - 5000,
    );
    // Its pack held nothing else live: it is gone.
    expect(findPack(service.service.ctx.db, before.cutShort.pack)).toBeUndefined();
    expect(existsSync(before.cutShort.file)).toBe(false);
  });

  it('stores again a block the store lost while the user held it, and keeps it from collection', async () => {
    const lost = await rawBlock(randomBytes(2000));
    const bucketId = await createBucket(service, ann, 'lost-row');
    const first = await storeVersion(service, ann, bucketId, null, [lost]);
    const ctx = service.service.ctx;
    ctx.db.prepare('DELETE FROM blocks WHERE cid = ?').run(lost.cid.toString());
    const asked = await call('GET', `${service.api}/blocks/${lost.cid.toString()}`, {
      token: ann.token(),
    });
    expect(asked.status).toBe(404);

    await storeVersion(service, ann, bucketId, first, [lost]);
    ctx.collectGarbage();
    expect((await readBack(ann, lost)).equals(Buffer.from(lost.bytes))).toBe(true);
    expect(
      ctx.db.prepare('SELECT holders FROM blocks WHERE cid = ?').pluck().get(lost.cid.toString()),
    ).toBe(1);
  });

  it('still serves and collects a block stored as a file of its own by an earlier server', async () => {
    const block = await rawBlock(new Uint8Array(3000).fill(4));
    const bucketId = await createBucket(service, ann, 'legacy');
    await storeVersion(service, ann, bucketId, null, [block]);
    const place = stored(block);
    if (!place?.pack) throw new Error('the block is not in a pack');
    // Turn it into what a server before packs wrote: blocks/<fan-out>/<cid>, no pack.
    const ctx = service.service.ctx;
    const legacyFile = ctx.blocks.legacyBlockPath(block.cid.toString());
    mkdirSync(path.dirname(legacyFile), { recursive: true });
    copyFileSync(place.file, legacyFile);
    ctx.db
      .prepare('UPDATE blocks SET pack = NULL, pack_offset = NULL WHERE cid = ?')
      .run(block.cid.toString());
    releasePackBytes(ctx.db, place.pack, place.size);
    expect(readFileSync(legacyFile).equals(Buffer.from(block.bytes))).toBe(true);
    await ctx.compactPacks();
    expect(existsSync(place.file)).toBe(false);

    expect(stored(block)).toMatchObject({ pack: null, file: legacyFile, offset: 0 });
    expect((await readBack(ann, block)).equals(Buffer.from(block.bytes))).toBe(true);
    expect(
      (await call('DELETE', `${service.api}/buckets/${bucketId}`, { token: ann.token() })).status,
    ).toBe(204);
    expect(stored(block)).toBeUndefined();
    expect(existsSync(legacyFile)).toBe(false);
  });
});
