import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call } from '../helpers/http-client.ts';
import { rawBlock, type Block } from '../helpers/cars.ts';
import { damageTable } from '../helpers/damaged-database.ts';
import { mountMemoryDisk } from '../helpers/limited-disks.ts';
import { createBucket, enrolledDevice, storeVersion } from '../helpers/flows.ts';
import { storedBlock } from '../helpers/stored-blocks.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { markDatabaseDamaged } from '../../server/store/kept-database-copy.ts';
import { monthlyEgress } from '../../server/store/egress.ts';

// The copy of its database a service keeps, put back in place of a damaged one, finds every
// block it names: packs compacted or collected after it was made wait until a newer copy is
// kept, rather than go at once.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-kept-copy-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function readBack(service: TestService, device: TestDevice, block: Block) {
  return call('GET', `${service.api}/blocks/${block.cid.toString()}`, { token: device.token() });
}

/** A service on `dataDir` whose pack of two blocks was compacted: the pack is retired. */
async function withRetiredPack(dataDir: string): Promise<TestService> {
  const service = await startTestService({ dataDir });
  const ann = await enrolledDevice(service, 'ann@example.org');
  const bob = await enrolledDevice(service, 'bob@example.org');
  const shared = await rawBlock(new Uint8Array(1024).fill(7));
  const annBucket = await createBucket(service, ann, 'ann');
  await storeVersion(service, ann, annBucket, null, [
    await rawBlock(new Uint8Array(64 * 1024).fill(8)),
    shared,
  ]);
  await storeVersion(service, bob, await createBucket(service, bob, 'bob'), null, [shared]);
  expect(
    (await call('DELETE', `${service.api}/buckets/${annBucket}`, { token: ann.token() })).status,
  ).toBe(204);
  await service.service.ctx.compactPacks();
  // The pack, and the file of the chunks of Ann's metadata CAR, which no other CAR holds.
  expect(retired(dataDir, '.pack')).toHaveLength(1);
  expect(retired(dataDir, '.chunks')).toHaveLength(1);
  return service;
}

/** The retired files with this suffix, by name. */
function retired(dataDir: string, suffix: string): string[] {
  return readdirSync(path.join(dataDir, 'retired-packs')).filter((name) => name.endsWith(suffix));
}

describe('the kept copy of the database', () => {
  it('put back after packs were compacted and collected, finds the blocks it names', async () => {
    const dataDir = path.join(scratch, 'data');
    const shared = await rawBlock(new Uint8Array(1024).fill(5));
    const own = await rawBlock(new Uint8Array(64 * 1024).fill(6));
    let service = await startTestService({ dataDir });
    const ann = await enrolledDevice(service, 'ann@example.org');
    const bob = await enrolledDevice(service, 'bob@example.org');
    const annBucket = await createBucket(service, ann, 'ann');
    const annVersion = await storeVersion(service, ann, annBucket, null, [own, shared]);
    await storeVersion(service, bob, await createBucket(service, bob, 'bob'), null, [shared]);
    const pack = storedBlock(dataDir, shared.cid.toString())?.pack;
    const pull = () =>
      call('GET', `${service.api}/buckets/metadata/${annVersion}/pull`, { token: ann.token() });
    const annCar = (await pull()).bytes;
    // Closed, the service keeps a copy naming the pack of both blocks.
    await service.close();
    expect(existsSync(path.join(dataDir, 'service.sqlite.copy'))).toBe(true);

    service = await startTestService({ dataDir });
    expect(
      (await call('DELETE', `${service.api}/buckets/${annBucket}`, { token: ann.token() })).status,
    ).toBe(204);
    // `own` is collected, and the pack, mostly dead, rewritten: the shared block moves.
    await service.service.ctx.compactPacks();
    expect(storedBlock(dataDir, shared.cid.toString())?.pack).not.toBe(pack);
    expect(retired(dataDir, '.pack')).toEqual([`${pack}.pack`]);
    expect(retired(dataDir, '.chunks')).toHaveLength(1);
    // The database is damaged before the service stops: no newer copy can be kept.
    damageTable(path.join(dataDir, 'service.sqlite'), 'invoices');
    markDatabaseDamaged(dataDir);
    await service.close();

    service = await startTestService({ dataDir });
    try {
      expect(service.service.restoredDatabase).toBeDefined();
      // As the copy has it: Ann's bucket is there again, and both blocks in the pack it names.
      for (const [device, block] of [
        [ann, own],
        [ann, shared],
        [bob, shared],
      ] as const) {
        const answer = await readBack(service, device, block);
        expect(answer.status).toBe(200);
        expect(Buffer.from(answer.bytes).equals(Buffer.from(block.bytes))).toBe(true);
      }
      expect(storedBlock(dataDir, shared.cid.toString())?.pack).toBe(pack);
      // And Ann's version's list of files, whose chunks were retired with her bucket.
      const pulled = await pull();
      expect(pulled.status).toBe(200);
      expect(Buffer.from(pulled.bytes).equals(Buffer.from(annCar))).toBe(true);
      expect(readdirSync(path.join(dataDir, 'retired-packs'))).toEqual([]);
    } finally {
      await service.close();
    }
  });

  it('lets retired packs go when a disk too full for a copy would otherwise stay full', async () => {
    const disk = mountMemoryDisk(path.join(scratch, 'small'), 'tmpfs', 8);
    try {
      const dataDir = path.join(disk.dir, 'data');
      const service = await withRetiredPack(dataDir);
      // Something else takes every last byte of the disk.
      const free = statfsSync(dataDir);
      writeFileSync(path.join(disk.dir, 'filler'), Buffer.alloc(free.bavail * free.bsize));
      await service.close();
      // No copy could be made, and the retired pack went all the same.
      expect(existsSync(path.join(dataDir, 'service.sqlite.copy'))).toBe(false);
      expect(readdirSync(path.join(dataDir, 'retired-packs'))).toEqual([]);
      expect(readdirSync(dataDir).filter((name) => name.includes('partial'))).toEqual([]);
    } finally {
      disk.unmount();
    }
  });

  it('is not made again for counts alone: bytes served, and when a device was last seen', async () => {
    const dataDir = path.join(scratch, 'served-only');
    const block = await rawBlock(new Uint8Array(4096).fill(9));
    let service = await startTestService({ dataDir });
    const ann = await enrolledDevice(service, 'ann@example.org');
    await storeVersion(service, ann, await createBucket(service, ann, 'ann'), null, [block]);
    await service.close();
    const copy = path.join(dataDir, 'service.sqlite.copy');
    const made = statSync(copy);

    const lastSeen = async (): Promise<number> => {
      const keys = await call('GET', `${service.api}/auth/device_api_key`, { token: ann.token() });
      return (keys.json as Array<{ last_seen_at: number }>)[0]?.last_seen_at ?? 0;
    };

    // A restore's reads, a few minutes on: a block, and a CAR of it.
    service = await startTestService({ dataDir });
    service.advance(3 * 60_000);
    expect((await readBack(service, ann, block)).status).toBe(200);
    const car = await call('POST', `${service.api}/blocks/car`, {
      token: ann.token(),
      json: [block.cid.toString()],
    });
    expect(car.status).toBe(200);
    const counted = monthlyEgress(service.service.ctx.db, ann.userId, Date.now());
    expect(counted).toBeGreaterThanOrEqual(2 * 4096);
    const seen = await lastSeen();
    expect(seen).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) + 170);
    await service.close();
    // The copy is the one made before: written again through a file of its own, it would be
    // another file.
    expect(statSync(copy)).toMatchObject({ ino: made.ino, mtimeMs: made.mtimeMs });

    // Anything else changed is copied, with the counts so far.
    service = await startTestService({ dataDir });
    await createBucket(service, ann, 'more');
    await service.close();
    expect(statSync(copy).ino).not.toBe(made.ino);
    const kept = new Database(copy, { readonly: true });
    try {
      expect(monthlyEgress(kept, ann.userId, Date.now())).toBe(counted);
    } finally {
      kept.close();
    }
  });

  it('is made again once the pages a large deletion freed are given back, and shrinks with the database', async () => {
    const dataDir = path.join(scratch, 'shrunk');
    const copy = path.join(dataDir, 'service.sqlite.copy');
    // A bucket of 40 000 blocks: rows of a few megabytes, freed when it is deleted.
    let service = await startTestService({ dataDir });
    const ann = await enrolledDevice(service, 'ann@example.org');
    const bucket = await createBucket(service, ann, 'ann');
    const blocks = await Promise.all(
      Array.from({ length: 40_000 }, (_, at) => rawBlock(Buffer.from(`block ${at}`))),
    );
    await storeVersion(service, ann, bucket, null, blocks);
    expect(
      (await call('DELETE', `${service.api}/buckets/${bucket}`, { token: ann.token() })).status,
    ).toBe(204);
    while (service.service.ctx.collectGarbage() > 0);
    await service.close();
    const large = statSync(copy);

    // A later run gives the free pages back (a command's tidy, the server's sweep) and changes
    // nothing else: the copy kept follows the database down.
    service = await startTestService({ dataDir });
    service.service.ctx.releaseFreePages(() => true);
    await service.close();
    const database = statSync(path.join(dataDir, 'service.sqlite'));
    const shrunk = statSync(copy);
    expect(shrunk.ino).not.toBe(large.ino);
    expect(shrunk.size).toBeLessThan(large.size / 4);
    expect(shrunk.size).toBeLessThanOrEqual(database.size);
  });

  it('keeps retired packs until a copy is kept that no longer names them', async () => {
    const dataDir = path.join(scratch, 'kept-until-copied');
    const service = await withRetiredPack(dataDir);
    await service.close();
    expect(existsSync(path.join(dataDir, 'service.sqlite.copy'))).toBe(true);
    expect(readdirSync(path.join(dataDir, 'retired-packs'))).toEqual([]);
  });
});
