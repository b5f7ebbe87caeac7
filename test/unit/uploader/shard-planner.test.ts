import { afterAll, describe, expect, it, vi } from 'vitest';
import type Database from 'better-sqlite3';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CarReader } from '@ipld/car';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import { ChunkHasher } from '../../../main/packer/chunk-hasher.ts';
import { openStateDatabase, uploadQueue } from '../../../main/state/index.ts';
import {
  plannedShardBody,
  type PlannedBlockPages,
} from '../../../main/uploader/planned-shard-body.ts';
import { ShardPlanner } from '../../../main/uploader/shard-planner.ts';
import { ShardWriter } from '../../../main/uploader/shard-writer.ts';
import { dropStrayLeaves } from '../../../main/uploader/stray-leaves.ts';
import { LeafSizes } from '../../../main/packer/index.ts';
import { MAX_SHARD_BLOCKS } from '../../../main/uploader/shard-target.ts';
import { queuedUpload } from '../../helpers/queued-upload.ts';

// A planned shard must be byte for byte the shard staging would have written: same layout,
// same CID, and a body read back from the source that hashes to it, whether its large blocks
// are read and checked on the hasher's thread or, with no slot free there, on this one.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-planner-'));
const hasher = new ChunkHasher(1);
const databases: Database.Database[] = [];
afterAll(async () => {
  for (const db of databases) db.close();
  rmSync(scratch, { recursive: true, force: true });
  await hasher.close();
});

/** Where a body's large blocks are read and checked. */
const readers = [
  ['on this thread', undefined],
  ['on the hasher thread', () => hasher],
] as const;

/**
 * A planner writing its blocks into a plan of a state database in `dir`. `record` seals it and
 * records it as an upload whose shards are all needed, as a backup does, and gives each
 * shard's blocks as the upload reads them: from the upload queue, a page at a time.
 */
function plannerIn(dir: string, target: number) {
  const db = openStateDatabase(path.join(dir, 'state.sqlite'));
  databases.push(db);
  const queue = uploadQueue(db);
  const plan = queue.startPlan('bucket-1');
  const planner = new ShardPlanner(target, plan);
  return {
    planner,
    record: (): PlannedBlockPages[] => {
      planner.seal();
      const shards = planner.shards.map((shard) => ({
        shardCid: shard.shardCid.toString(),
        file: '',
        bytes: shard.bytes,
        needed: true,
      }));
      queue.record(queuedUpload({ source_dir: dir }), shards, plan);
      return shards.map(
        ({ shardCid }) =>
          (from, count) =>
            queue.blocksOf('v1', shardCid, from, count),
      );
    },
  };
}

/** The pages of the shard numbered `index`; one not planned fails the test. */
function shardPages(pages: readonly PlannedBlockPages[], index: number): PlannedBlockPages {
  const found = pages[index];
  if (!found) throw new Error(`no shard ${index} was planned`);
  return found;
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts);
}

/** A source of one large file (leaves of 1 MiB and a short tail) and two small files. */
async function source(dir: string) {
  const large = randomBytes((3 << 20) + 4321);
  const small = [randomBytes(700), randomBytes(90_000)];
  writeFileSync(path.join(dir, 'large.bin'), large);
  small.forEach((bytes, index) => writeFileSync(path.join(dir, `small-${index}.txt`), bytes));
  const blocks: Array<{ path: string; offset: number; bytes: Buffer }> = [];
  for (let offset = 0; offset < large.length; offset += 1 << 20)
    blocks.push({ path: 'large.bin', offset, bytes: large.subarray(offset, offset + (1 << 20)) });
  small.forEach((bytes, index) => blocks.push({ path: `small-${index}.txt`, offset: 0, bytes }));
  return Promise.all(
    blocks.map(async (block) => ({
      ...block,
      cid: CID.createV1(raw.code, await sha256.digest(block.bytes)),
    })),
  );
}

describe('ShardPlanner and plannedShardBody', () => {
  it('plan the shards staging writes, and read them back from the source byte for byte', async () => {
    const dir = mkdtempSync(path.join(scratch, 'same-'));
    const blocks = await source(dir);
    const target = (2 << 20) + 100;
    const writer = new ShardWriter(path.join(dir, '.staging'), target);
    const { planner, record } = plannerIn(dir, target);
    for (const [leaf, block] of blocks.entries()) {
      await writer.add(block.cid, block.bytes, leaf);
      planner.add(block.cid, block.bytes, { path: block.path, offset: block.offset }, leaf);
    }
    await writer.seal();
    const pages = record();
    expect(planner.shards.length).toBeGreaterThan(1);
    expect(planner.shards.map((shard) => [shard.shardCid.toString(), shard.bytes])).toEqual(
      writer.shards.map((shard) => [shard.shardCid.toString(), shard.bytes]),
    );
    const hasherReads = vi.spyOn(hasher, 'read');
    for (const [index, shard] of planner.shards.entries()) {
      for (const [, reader] of readers) {
        const body = await readAll(plannedShardBody(dir, shardPages(pages, index), reader));
        expect(body.equals(readFileSync(writer.shards[index]?.file ?? ''))).toBe(true);
        expect(createHash('sha256').update(body).digest()).toEqual(
          Buffer.from(shard.shardCid.multihash.digest),
        );
        expect(body.length).toBe(shard.bytes);
      }
    }
    // The large file's three full leaves went through the hasher's thread (its short tail is
    // read as small blocks are).
    expect(hasherReads).toHaveBeenCalledTimes(3);
    hasherReads.mockRestore();
  });

  it('drop stray leaves: a shard is made again as if they had never come, and one left empty is never needed', async () => {
    const dir = mkdtempSync(path.join(scratch, 'strays-'));
    const blocks = await source(dir);
    const target = (2 << 20) + 100;
    const writer = new ShardWriter(path.join(dir, '.staging'), target);
    const { planner, record } = plannerIn(dir, target);
    const leaves = new LeafSizes();
    for (const [leaf, block] of blocks.entries()) {
      leaves.add(block.cid, block.bytes.length);
      await writer.add(block.cid, block.bytes, leaf);
      planner.add(block.cid, block.bytes, { path: block.path, offset: block.offset }, leaf);
    }
    await writer.seal();
    planner.seal();
    // Two shards: the large file's first two leaves, then its last two and the small files.
    expect(blocks.map((_, leaf) => writer.leafShards.shardOf(leaf))).toEqual([0, 0, 1, 1, 1, 1]);
    const emptied = writer.shards[0]?.shardCid.toString();
    // The large file failed at its fourth leaf: its first three are strays.
    const strays = [0, 1, 2];
    await dropStrayLeaves(writer, strays, leaves, dir);
    await dropStrayLeaves(planner, strays, leaves, dir);
    const pages = record();

    // What staging only the blocks kept writes, in a shard of its own.
    const alone = new ShardWriter(path.join(dir, '.alone'), target);
    for (const [leaf, block] of blocks.slice(3).entries())
      await alone.add(block.cid, block.bytes, leaf);
    await alone.seal();
    const expected = alone.shards.map((shard) => [shard.shardCid.toString(), shard.bytes]);
    expect(expected).toHaveLength(1);
    for (const shards of [writer, planner]) {
      expect(blocks.map((_, leaf) => shards.leafShards.shardOf(leaf))).toEqual([
        undefined,
        undefined,
        undefined,
        1,
        1,
        1,
      ]);
      expect(shards.shards[0]?.shardCid.toString()).toBe(emptied);
      expect([shards.shards[1]?.shardCid.toString(), shards.shards[1]?.bytes]).toEqual(expected[0]);
    }
    expect(
      readFileSync(writer.shards[1]?.file ?? '').equals(readFileSync(alone.shards[0]?.file ?? '')),
    ).toBe(true);
    const body = await readAll(plannedShardBody(dir, shardPages(pages, 1)));
    expect(body.equals(readFileSync(alone.shards[0]?.file ?? ''))).toBe(true);
  });

  it('keep small and large blocks in order in a body of many small files', async () => {
    const dir = mkdtempSync(path.join(scratch, 'many-'));
    const blocks: Array<{ path: string; offset: number; bytes: Buffer }> = [];
    const large = randomBytes((1 << 20) + 300_000);
    writeFileSync(path.join(dir, 'large.bin'), large);
    for (let index = 0; index < 5000; index += 1) {
      const bytes = randomBytes(20 + (index % 50));
      writeFileSync(path.join(dir, `f${index}`), bytes);
      blocks.push({ path: `f${index}`, offset: 0, bytes });
      // A large file's two leaves among the small ones, in the same pull of the body.
      if (index === 100) {
        blocks.push({ path: 'large.bin', offset: 0, bytes: large.subarray(0, 1 << 20) });
        blocks.push({ path: 'large.bin', offset: 1 << 20, bytes: large.subarray(1 << 20) });
      }
    }
    const writer = new ShardWriter(path.join(dir, '.staging'), 1 << 20);
    const { planner, record } = plannerIn(dir, 1 << 20);
    for (const [leaf, block] of blocks.entries()) {
      const cid = CID.createV1(raw.code, await sha256.digest(block.bytes));
      await writer.add(cid, block.bytes, leaf);
      planner.add(cid, block.bytes, { path: block.path, offset: block.offset }, leaf);
    }
    await writer.seal();
    const pages = record();
    expect(planner.shards.length).toBeGreaterThan(1);
    expect(planner.shards.map((shard) => shard.shardCid.toString())).toEqual(
      writer.shards.map((shard) => shard.shardCid.toString()),
    );
    for (const index of planner.shards.keys()) {
      for (const [, reader] of readers) {
        const body = await readAll(plannedShardBody(dir, shardPages(pages, index), reader));
        expect(body.equals(readFileSync(writer.shards[index]?.file ?? ''))).toBe(true);
      }
    }
  });

  it('send a shard of 10 000 small files from the upload queue, never holding its whole plan', async () => {
    const dir = mkdtempSync(path.join(scratch, 'many-'));
    const writer = new ShardWriter(path.join(dir, '.staging'), 64 << 20);
    const { planner, record } = plannerIn(dir, 64 << 20);
    for (let index = 0; index < 10_000; index += 1) {
      const name = `f${index}.txt`;
      const bytes = Buffer.from(`file ${index} ${'x'.repeat(index % 300)}`);
      writeFileSync(path.join(dir, name), bytes);
      const cid = CID.createV1(raw.code, await sha256.digest(bytes));
      await writer.add(cid, bytes, index);
      planner.add(cid, bytes, { path: name, offset: 0 }, index);
    }
    await writer.seal();
    const [pages, ...others] = record();
    if (!pages || others.length > 0) throw new Error('expected one shard');
    const asked: number[] = [];
    const body = await readAll(
      plannedShardBody(dir, (from, count) => {
        const page = pages(from, count);
        asked.push(page.length);
        return page;
      }),
    );
    expect(body.equals(readFileSync(writer.shards[0]?.file ?? ''))).toBe(true);
    expect(asked.reduce((sum, count) => sum + count, 0)).toBe(10_000);
    expect(Math.max(...asked)).toBeLessThanOrEqual(5_000);
  });

  it('close a shard at MAX_SHARD_BLOCKS blocks, however far it is from its byte target', async () => {
    const dir = mkdtempSync(path.join(scratch, 'blocks-'));
    const writer = new ShardWriter(path.join(dir, '.staging'), 64 << 20);
    const { planner } = plannerIn(dir, 64 << 20);
    for (let index = 0; index <= MAX_SHARD_BLOCKS; index += 1) {
      const bytes = Buffer.from(`block ${index}`);
      const cid = CID.createV1(raw.code, await sha256.digest(bytes));
      void writer.add(cid, bytes, index);
      planner.add(cid, bytes, { path: `f${index}`, offset: 0 }, index);
    }
    await writer.seal();
    planner.seal();
    expect(planner.shards.map((shard) => shard.shardCid.toString())).toEqual(
      writer.shards.map((shard) => shard.shardCid.toString()),
    );
    const blocksIn = async (file: string): Promise<number> => {
      let count = 0;
      for await (const block of (await CarReader.fromBytes(readFileSync(file))).blocks())
        if (block) count += 1;
      return count;
    };
    expect(await Promise.all(writer.shards.map((shard) => blocksIn(shard.file)))).toEqual([
      MAX_SHARD_BLOCKS,
      1,
    ]);
  });

  const changes: ReadonlyArray<readonly [string, (file: string) => void]> = [
    ['rewritten', (file) => writeFileSync(file, randomBytes(3 << 20))],
    ['cut short', (file) => truncateSync(file, (1 << 20) + 10)],
    ['deleted', (file) => rmSync(file)],
  ];
  it.each(
    changes.flatMap(([how, change]) =>
      readers.map(([where, reader]) => [how, where, change, reader] as const),
    ),
  )(
    'stop with source_changed when a file was %s since it was planned (read %s)',
    async (_, _where, change, reader) => {
      const dir = mkdtempSync(path.join(scratch, 'changed-'));
      const blocks = await source(dir);
      const { planner, record } = plannerIn(dir, 64 << 20);
      for (const [leaf, block] of blocks.entries())
        planner.add(block.cid, block.bytes, { path: block.path, offset: block.offset }, leaf);
      const pages = record();
      change(path.join(dir, 'large.bin'));
      await expect(
        readAll(plannedShardBody(dir, shardPages(pages, 0), reader)),
      ).rejects.toMatchObject({
        code: 'source_changed',
        message: 'large.bin changed after it was read for this backup',
      });
    },
  );
});
