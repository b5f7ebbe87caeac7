import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statfsSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { carBytes, cborBlock, rawBlock, type Block } from '../helpers/cars.ts';
import { createBucket, enrolledDevice, push } from '../helpers/flows.ts';
import { call } from '../helpers/http-client.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { mountMemoryDisk } from '../helpers/limited-disks.ts';
import { SMALL_LIMITS, startTestService, type TestService } from '../helpers/test-service.ts';
import { OUT_OF_SPACE_MSG } from '../../main/protocol/index.ts';
import { MAX_CHUNK_BYTES } from '../../server/blocks/content-chunker.ts';
import { carChunksOf, releaseCarChunks } from '../../server/store/metadata-chunks.ts';

// The service keeps metadata CARs as chunks, each stored once however many versions hold it
// (server/store/metadata-chunks.ts), while pull gives back the bytes pushed exactly (§10).
// A backup of 100 000 files sends a 16 MB CAR with every version; one file changed, nearly
// all of it is the CAR before.

/** Room for CARs of a few hundred nodes. */
const limits = { ...SMALL_LIMITS, metadataCarBytes: 4 * 1024 * 1024 };
const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-metadata-chunks-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Bytes of the files of chunks the service keeps. */
function chunkBytes(dataDir: string): number {
  const dir = path.join(dataDir, 'metadata', 'chunks');
  return readdirSync(dir).reduce((sum, name) => sum + statSync(path.join(dir, name)).size, 0);
}

/**
 * Flips the byte at `at` of the service's one file of chunks, as a bad disk would; returns the
 * file and its bytes as they are now.
 */
function damageOnlyChunkFile(dataDir: string, at: number): { file: string; bytes: Buffer } {
  const dir = path.join(dataDir, 'metadata', 'chunks');
  const [name, ...more] = readdirSync(dir);
  if (!name || more.length > 0) throw new Error(`not one file of chunks in ${dir}`);
  const file = path.join(dir, name);
  const bytes = readFileSync(file);
  bytes[at] = (bytes[at] ?? 0) ^ 0xff;
  writeFileSync(file, bytes);
  return { file, bytes };
}

/** A metadata CAR of a manifest and `nodes`, as the client writes one. */
async function metadataCarOf(nodes: readonly Block[]): Promise<{ cid: string; car: Uint8Array }> {
  const manifest = await cborBlock({ version: 1, nonce: randomBytes(8) });
  return {
    cid: manifest.cid.toString(),
    car: await carBytes([manifest.cid], [manifest, ...nodes]),
  };
}

async function pushCar(
  service: TestService,
  device: TestDevice,
  bucketId: string,
  previousId: string | null,
  metadata: { cid: string; car: Uint8Array },
): Promise<string> {
  const pushed = await push(service, device, {
    bucketId,
    expectedDataSize: 0,
    previousId,
    car: metadata.car,
    metadataCid: metadata.cid,
  });
  expect(pushed.status).toBe(200);
  return pushed.json.id as string;
}

async function pull(service: TestService, device: TestDevice, id: string) {
  return call('GET', `${service.api}/buckets/metadata/${id}/pull`, { token: device.token() });
}

/**
 * Two versions of an interactive bucket, the second keeping a tenth of the first one's nodes:
 * once the first is deleted, its file of chunks is mostly dead bytes.
 */
async function twoVersionsSharingATenth(service: TestService, device: TestDevice) {
  const bucketId = await createBucket(service, device, 'Documents', 'interactive');
  const nodes = await Promise.all(Array.from({ length: 3000 }, () => rawBlock(randomBytes(1000))));
  const first = await metadataCarOf(nodes);
  const firstId = await pushCar(service, device, bucketId, null, first);
  const [firstFile] = readdirSync(path.join(service.dataDir, 'metadata', 'chunks'));
  if (!firstFile) throw new Error('no file of chunks');
  const kept = [
    ...nodes.slice(0, 300),
    ...(await Promise.all(Array.from({ length: 2700 }, () => rawBlock(randomBytes(1000))))),
  ];
  const second = await metadataCarOf(kept);
  const secondId = await pushCar(service, device, bucketId, firstId, second);
  return { bucketId, first, firstId, firstFile, second, secondId };
}

describe('metadata CARs kept as chunks', () => {
  it('store what versions share once, pull each exactly, and go with the last version holding them', async () => {
    const dataDir = path.join(scratch, 'shared');
    const service = await startTestService({ dataDir, limits });
    try {
      const ann = await enrolledDevice(service, 'ann@example.org');
      const bucketId = await createBucket(service, ann, 'Documents', 'interactive');
      const nodes = await Promise.all(
        Array.from({ length: 3000 }, () => rawBlock(randomBytes(1000))),
      );
      const first = await metadataCarOf(nodes);
      const firstId = await pushCar(service, ann, bucketId, null, first);
      const afterFirst = chunkBytes(dataDir);
      expect(afterFirst).toBe(first.car.length);

      // One node changed in the middle of the tree.
      const changed = [...nodes];
      changed[1500] = await rawBlock(randomBytes(1000));
      const second = await metadataCarOf(changed);
      const secondId = await pushCar(service, ann, bucketId, firstId, second);
      const added = chunkBytes(dataDir) - afterFirst;
      expect(added).toBeGreaterThan(0);
      // The chunk of the manifest, that of the node, and at most one after it, before the
      // cuts fall where they fell before: a tenth of the CAR at most.
      expect(added).toBeLessThanOrEqual(3 * MAX_CHUNK_BYTES);

      for (const [id, metadata] of [
        [firstId, first],
        [secondId, second],
      ] as const) {
        const pulled = await pull(service, ann, id);
        expect(pulled.status).toBe(200);
        expect(pulled.headers.get('content-length')).toBe(String(metadata.car.length));
        expect(Buffer.from(pulled.bytes).equals(Buffer.from(metadata.car))).toBe(true);
      }

      // The first version goes: the second still pulls whole, from chunks of both pushes.
      const del = (id: string) =>
        call('DELETE', `${service.api}/buckets/metadata/${id}`, { token: ann.token() });
      expect((await del(firstId)).status).toBe(204);
      expect(
        Buffer.from((await pull(service, ann, secondId)).bytes).equals(Buffer.from(second.car)),
      ).toBe(true);
      // The last one goes: no file of chunks is left in place.
      expect((await del(secondId)).status).toBe(204);
      expect(chunkBytes(dataDir)).toBe(0);
      expect(readdirSync(path.join(dataDir, 'retired-packs')).length).toBeGreaterThan(0);
    } finally {
      await service.close();
    }
  });

  it('deletes a version whose file of chunks will not move away, and moves it on a later sweep', async () => {
    const dataDir = path.join(scratch, 'stuck-retire');
    const service = await startTestService({ dataDir, limits });
    try {
      const ctx = service.service.ctx;
      const failures: string[] = [];
      ctx.onHousekeepingFailure = (_error, what) => failures.push(what);
      const ann = await enrolledDevice(service, 'ann@example.org');
      const bucketId = await createBucket(service, ann, 'Documents', 'interactive');
      const id = await pushCar(
        service,
        ann,
        bucketId,
        null,
        await metadataCarOf([await rawBlock()]),
      );
      // The folder retired files go to is, for now, a file: the move fails (ENOTDIR).
      const retired = path.join(dataDir, 'retired-packs');
      rmSync(retired, { recursive: true, force: true });
      writeFileSync(retired, 'in the way');

      const deleted = await call('DELETE', `${service.api}/buckets/metadata/${id}`, {
        token: ann.token(),
      });
      expect(deleted.status).toBe(204);
      // Reported (once, or again if the sweep tried meanwhile).
      expect(new Set(failures)).toEqual(new Set(['free the metadata of deleted versions']));
      expect((await pull(service, ann, id)).status).toBe(404);
      expect(chunkBytes(dataDir)).toBeGreaterThan(0);

      // The service's own sweep (every 200 ms here) tries again, and succeeds once it can.
      rmSync(retired);
      mkdirSync(retired);
      const failedBefore = failures.length;
      for (let waited = 0; chunkBytes(dataDir) > 0 && waited < 5000; waited += 50)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(chunkBytes(dataDir)).toBe(0);
      expect(readdirSync(retired).length).toBe(1);
      expect(failures.length).toBe(failedBefore);
    } finally {
      await service.close();
    }
  });

  it('rewrites a file of chunks its versions mostly left, and pulls stay exact, one under way too', async () => {
    const dataDir = path.join(scratch, 'compacted');
    let service = await startTestService({ dataDir, limits });
    const ann = await enrolledDevice(service, 'ann@example.org');
    let secondId: string;
    let secondCar: Buffer;
    try {
      const versions = await twoVersionsSharingATenth(service, ann);
      const { first, firstId, firstFile, second } = versions;
      secondCar = Buffer.from(second.car);
      secondId = versions.secondId;
      const ctx = service.service.ctx;
      // A pull under way: it looked its chunks up, some of them in the first file.
      const underWay = ctx.blocks.metadataChunks.read(carChunksOf(ctx.db, secondId) ?? [], () => {
        throw new Error('no chunk is damaged');
      });

      const bothFiles = chunkBytes(dataDir);
      const deleted = await call('DELETE', `${service.api}/buckets/metadata/${firstId}`, {
        token: ann.token(),
      });
      expect(deleted.status).toBe(204);
      // The first file is most of it dead bytes: rewritten, by this call or the sweep's.
      await ctx.compactChunkFiles();
      await ctx.compactChunkFiles();
      const files = readdirSync(path.join(dataDir, 'metadata', 'chunks'));
      expect(files).not.toContain(firstFile);
      expect(files).toHaveLength(2);
      // Most of the first CAR's bytes are gone from the disk.
      expect(chunkBytes(dataDir)).toBeLessThan(bothFiles - first.car.length / 2);
      expect(chunkBytes(dataDir)).toBeGreaterThanOrEqual(second.car.length);

      const read: Buffer[] = [];
      for await (const bytes of underWay) read.push(bytes);
      expect(Buffer.concat(read).equals(secondCar)).toBe(true);
      expect(Buffer.from((await pull(service, ann, secondId)).bytes).equals(secondCar)).toBe(true);
    } finally {
      await service.close();
    }
    // Recorded for good: a new start pulls it the same.
    service = await startTestService({ dataDir, limits });
    try {
      expect(Buffer.from((await pull(service, ann, secondId)).bytes).equals(secondCar)).toBe(true);
    } finally {
      await service.close();
    }
  });

  for (const { damage, done, told, compactedAgain } of [
    {
      damage: 'cut short',
      done: (bytes: Buffer) => bytes.subarray(0, 10_000),
      told: /cut short/,
      // Every chunk the second version keeps lay past the cut: stored anew, they leave the file
      // none, and it goes as a dead file does, without a copy.
      compactedAgain: 0,
    },
    {
      // In the tenth of its nodes the second version keeps: a chunk the compaction would copy.
      damage: 'with a byte of a kept chunk changed',
      done: (bytes: Buffer) =>
        Buffer.concat([
          bytes.subarray(0, 150_000),
          Buffer.from([bytes[150_000]! ^ 0xff]),
          bytes.subarray(150_001),
        ]),
      told: /no longer matches its digest on the disk \(damaged\)/,
      // Only the damaged chunk is stored anew: the file keeps the others, and is compacted.
      compactedAgain: 1,
    },
  ])
    it(`leaves a file of chunks ${damage} on the disk as it is, and tries it again only once a client stored its chunks anew`, async () => {
      const dataDir = path.join(scratch, `compaction-${damage.replaceAll(' ', '-')}`);
      // No sweep of its own meanwhile: the calls below are the compactions.
      const service = await startTestService({ dataDir, limits, sweepIntervalMs: 3_600_000 });
      try {
        const ann = await enrolledDevice(service, 'ann@example.org');
        const { bucketId, firstId, firstFile, second, secondId } = await twoVersionsSharingATenth(
          service,
          ann,
        );
        const file = path.join(dataDir, 'metadata', 'chunks', firstFile);
        const damaged = done(readFileSync(file));
        writeFileSync(file, damaged);
        const deleted = await call('DELETE', `${service.api}/buckets/metadata/${firstId}`, {
          token: ann.token(),
        });
        expect(deleted.status).toBe(204);
        // Tried, and failed: named, and the file is as it was.
        const ctx = service.service.ctx;
        const compaction = ctx.compactChunkFiles();
        await expect(compaction).rejects.toThrow(
          /could not compact 1 file\(s\) of metadata chunks, left as they are \(/,
        );
        await expect(compaction).rejects.toThrow(told);
        expect(readFileSync(file).equals(damaged)).toBe(true);
        // Passed over from then on.
        await expect(ctx.compactChunkFiles()).resolves.toBe(0);
        expect(readdirSync(path.join(dataDir, 'metadata', 'chunks'))).toContain(firstFile);

        // The client found the second version's metadata damaged (canopy verify) and stored it
        // again: the damaged chunks lie in a new file, and the first file is tried again.
        const again = await pushCar(service, ann, bucketId, secondId, second);
        await expect(ctx.compactChunkFiles()).resolves.toBe(compactedAgain);
        ctx.retireDeadChunkFiles();
        expect(readdirSync(path.join(dataDir, 'metadata', 'chunks'))).not.toContain(firstFile);
        const secondCar = Buffer.from(second.car);
        for (const id of [secondId, again])
          expect(Buffer.from((await pull(service, ann, id)).bytes).equals(secondCar)).toBe(true);
      } finally {
        await service.close();
      }
    });

  it('hands out a chunk damaged on the disk as the disk has it, for the client to find', async () => {
    const dataDir = path.join(scratch, 'damaged');
    const service = await startTestService({ dataDir, limits });
    try {
      const ann = await enrolledDevice(service, 'ann@example.org');
      const bucketId = await createBucket(service, ann, 'Documents');
      const metadata = await metadataCarOf(
        await Promise.all(Array.from({ length: 300 }, () => rawBlock(randomBytes(1000)))),
      );
      const id = await pushCar(service, ann, bucketId, null, metadata);
      const { file, bytes } = damageOnlyChunkFile(dataDir, 200_000);
      // Whole, with the one byte the disk changed: the client's CID checks name the damage
      // (test/scenarios/backup-failures.test.ts), where a cut answer would pass for a network
      // failure.
      const pulled = await pull(service, ann, id);
      expect(pulled.status).toBe(200);
      const expected = Buffer.from(metadata.car);
      expected[200_000] = (expected[200_000] ?? 0) ^ 0xff;
      expect(Buffer.from(pulled.bytes).equals(expected)).toBe(true);
      // A file of chunks cut short on the disk cannot give the stated length: the answer breaks
      // off, or is an error when that shows before its first byte went.
      writeFileSync(file, bytes.subarray(0, 100_000));
      const cut = await pull(service, ann, id).then(
        (pulled) => pulled.status,
        () => 'broken off',
      );
      expect([500, 'broken off']).toContain(cut);
      expect(
        (await call('GET', `${service.api}/buckets/metadata/${id}`, { token: ann.token() })).status,
      ).toBe(200);
    } finally {
      await service.close();
    }
  });

  it('takes a pushed chunk in place of its stored copy damaged on the disk, for every version that holds it', async () => {
    const dataDir = path.join(scratch, 'healed');
    const service = await startTestService({ dataDir, limits });
    try {
      const ann = await enrolledDevice(service, 'ann@example.org');
      const bucketId = await createBucket(service, ann, 'Documents');
      const nodes = await Promise.all(
        Array.from({ length: 300 }, () => rawBlock(randomBytes(1000))),
      );
      const first = await metadataCarOf(nodes);
      const firstId = await pushCar(service, ann, bucketId, null, first);
      // A byte in the middle of the CAR goes bad: a chunk the next version shares.
      const { file } = damageOnlyChunkFile(dataDir, 150_000);
      expect(
        Buffer.from((await pull(service, ann, firstId)).bytes).equals(Buffer.from(first.car)),
      ).toBe(false);

      // The version a client stores in its place: the same nodes under another manifest.
      const second = await metadataCarOf(nodes);
      const before = chunkBytes(dataDir);
      const secondId = await pushCar(service, ann, bucketId, firstId, second);
      for (const [id, metadata] of [
        [secondId, second],
        [firstId, first],
      ] as const)
        expect(
          Buffer.from((await pull(service, ann, id)).bytes).equals(Buffer.from(metadata.car)),
          id,
        ).toBe(true);
      // Only the damaged chunk and the manifest's were written again, not the whole CAR.
      expect(chunkBytes(dataDir) - before).toBeLessThanOrEqual(3 * MAX_CHUNK_BYTES);

      // A file of chunks gone from the disk is healed alike, by the next push that holds them.
      rmSync(file);
      const third = await metadataCarOf(nodes);
      const thirdId = await pushCar(service, ann, bucketId, secondId, third);
      expect(
        Buffer.from((await pull(service, ann, thirdId)).bytes).equals(Buffer.from(third.car)),
      ).toBe(true);
    } finally {
      await service.close();
    }
  });

  it('still pulls a CAR a server before chunks stored whole, and drops files a crash left', async () => {
    const dataDir = path.join(scratch, 'whole');
    let service = await startTestService({ dataDir, limits });
    const ann = await enrolledDevice(service, 'ann@example.org');
    const bucketId = await createBucket(service, ann, 'Documents');
    const metadata = await metadataCarOf([await rawBlock()]);
    const id = await pushCar(service, ann, bucketId, null, metadata);
    // As an earlier server left it: the CAR whole in metadata/, no chunks.
    const db = service.service.ctx.db;
    db.transaction(() => releaseCarChunks(db, id))();
    service.service.ctx.retireDeadChunkFiles();
    writeFileSync(path.join(dataDir, 'metadata', `${id}.car`), metadata.car);
    // And a file of chunks whose push never committed.
    writeFileSync(path.join(dataDir, 'metadata', 'chunks', `${randomUUID()}.chunks`), 'partial');
    await service.close();

    service = await startTestService({ dataDir, limits });
    try {
      const pulled = await pull(service, ann, id);
      expect(pulled.status).toBe(200);
      expect(Buffer.from(pulled.bytes).equals(Buffer.from(metadata.car))).toBe(true);
      expect(readdirSync(path.join(dataDir, 'metadata', 'chunks'))).toEqual([]);
    } finally {
      await service.close();
    }
  });

  it('refuses a push whose chunks would take the room kept free, leaving nothing, and takes it once there is room', async () => {
    const MiB = 1024 * 1024;
    const disk = mountMemoryDisk(path.join(scratch, 'small'), 'tmpfs', 16);
    try {
      const dataDir = path.join(disk.dir, 'data');
      const service = await startTestService({
        dataDir,
        limits,
        keptFree: { fraction: 0.5, maxBytes: 1 << 30 },
      });
      try {
        const ann = await enrolledDevice(service, 'ann@example.org');
        const bucketId = await createBucket(service, ann, 'Documents');
        const metadata = await metadataCarOf(
          await Promise.all(Array.from({ length: 3000 }, () => rawBlock(randomBytes(1000)))),
        );
        // Room for the CAR staged above the 8 MiB kept free, but not for its chunks as well.
        const free = statfsSync(disk.dir);
        const filler = path.join(disk.dir, 'filler');
        writeFileSync(filler, Buffer.alloc(free.bavail * free.bsize - 12.5 * MiB));
        const refused = await push(service, ann, {
          bucketId,
          expectedDataSize: 0,
          previousId: null,
          car: metadata.car,
          metadataCid: metadata.cid,
        });
        expect(refused.status).toBe(500);
        expect(refused.json.msg).toBe(OUT_OF_SPACE_MSG);
        const listed = await call('GET', `${service.api}/buckets/metadata?bucket_id=${bucketId}`, {
          token: ann.token(),
        });
        expect(listed.json).toEqual([]);
        expect(readdirSync(path.join(dataDir, 'metadata', 'chunks'))).toEqual([]);
        expect(readdirSync(path.join(dataDir, 'staging'))).toEqual([]);

        rmSync(filler);
        const id = await pushCar(service, ann, bucketId, null, metadata);
        const pulled = await pull(service, ann, id);
        expect(Buffer.from(pulled.bytes).equals(Buffer.from(metadata.car))).toBe(true);
      } finally {
        await service.close();
      }
    } finally {
      disk.unmount();
    }
  });
});
