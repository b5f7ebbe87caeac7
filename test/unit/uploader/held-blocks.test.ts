import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CarReader } from '@ipld/car';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import { LeafSizes } from '../../../main/packer/index.ts';
import { dropHeldLeaves } from '../../../main/uploader/held-blocks.ts';
import { ShardWriter } from '../../../main/uploader/shard-writer.ts';

// The leaves the host holds leave a shard to send when they weigh enough in it: the shard is
// then what staging the other leaves alone would have written. A held leaf of little weight
// beside the leaves sent stays, a shard not to be sent is left as it is, and so is one that
// cannot be written again.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-held-blocks-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const MiB = 1 << 20;

/** Blocks of these sizes, staged in shards of `target` bytes, and their leaves. */
async function staged(name: string, sizes: readonly number[], target: number) {
  const blocks = await Promise.all(
    sizes.map(async (size) => {
      const bytes = randomBytes(size);
      return { bytes, cid: CID.createV1(raw.code, await sha256.digest(bytes)) };
    }),
  );
  const leaves = new LeafSizes();
  const writer = new ShardWriter(path.join(scratch, name), target);
  for (const [leaf, block] of blocks.entries()) {
    leaves.add(block.cid, block.bytes.length);
    await writer.add(block.cid, block.bytes, leaf);
  }
  await writer.seal();
  return { blocks, leaves, writer };
}

/** The CIDs of the blocks in a staged shard's file, in order. */
async function blocksIn(file: string): Promise<string[]> {
  const cids: string[] = [];
  for await (const block of (await CarReader.fromBytes(readFileSync(file))).blocks())
    cids.push(block.cid.toString());
  return cids;
}

describe('dropHeldLeaves', () => {
  it('makes a shard again without the held leaves that weigh in it, as staging the rest alone would, before the upload speed is known', async () => {
    // A photo the host holds (three leaves) and a note it lacks, in one shard.
    const { blocks, leaves, writer } = await staged('weighty', [MiB, MiB, 5000, 6], 64 * MiB);
    const told: string[] = [];
    const held = await dropHeldLeaves(writer, leaves, new Set([0]), (leaf) => leaf === 3, {
      sourceDir: scratch,
      uploadBytesPerSecond: undefined,
      progressOf: (shards, bytes) => {
        told.push(`${shards} shards of ${bytes} bytes`);
        return {
          addBytes: (count) => told.push(`${count} bytes`),
          addFile: () => told.push('a shard'),
          finish: () => told.push('done'),
        };
      },
    });
    expect(held).toBe(2 * MiB + 5000);
    // The shard made again is told, with its bytes, as the backup's 'trimming' phase.
    const bytes = 2 * MiB + 5006;
    expect(told).toEqual([`1 shards of ${bytes} bytes`, `${bytes} bytes`, 'a shard', 'done']);

    const alone = new ShardWriter(path.join(scratch, 'alone'), 64 * MiB);
    const note = blocks[3];
    if (!note) throw new Error('no note');
    await alone.add(note.cid, note.bytes, 0);
    await alone.seal();
    const [shard] = writer.shards;
    expect([shard?.shardCid.toString(), shard?.bytes]).toEqual([
      alone.shards[0]?.shardCid.toString(),
      alone.shards[0]?.bytes,
    ]);
    expect(await blocksIn(shard?.file ?? '')).toEqual([note.cid.toString()]);
    expect(blocks.map((_, leaf) => writer.leafShards.shardOf(leaf))).toEqual([
      undefined,
      undefined,
      undefined,
      0,
    ]);
  });

  it('sends a held leaf of little weight beside the leaves sent, before the upload speed is known, and leaves a shard not sent as it is', async () => {
    // Two shards: two leaves of 1 MiB and a small one, then one of 1 MiB.
    const { blocks, leaves, writer } = await staged('light', [MiB, MiB, 5000, MiB], 2 * MiB + 6000);
    expect(blocks.map((_, leaf) => writer.leafShards.shardOf(leaf))).toEqual([0, 0, 0, 1]);
    const before = writer.shards.map((shard) => shard.shardCid.toString());
    // Shard 0 is sent for its two large leaves; its small one is held. Shard 1 is not sent.
    const held = await dropHeldLeaves(writer, leaves, new Set([0]), (leaf) => leaf < 2, {
      sourceDir: scratch,
      uploadBytesPerSecond: undefined,
      progressOf: () => {
        throw new Error('no shard is made again: no phase is told');
      },
    });
    expect(held).toBe(0);
    expect(writer.shards.map((shard) => shard.shardCid.toString())).toEqual(before);
    expect(await blocksIn(writer.shards[0]?.file ?? '')).toEqual(
      blocks.slice(0, 3).map((block) => block.cid.toString()),
    );
    expect(blocks.map((_, leaf) => writer.leafShards.shardOf(leaf))).toEqual([0, 0, 0, 1]);
  });

  it('makes a shard again for a held leaf of little weight on a slow link, and sends held leaves that weigh on one as fast as the disk', async () => {
    // Held: one leaf of 100 000 bytes beside 1 MiB sent, under a tenth of the shard. At 100 kB/s
    // it takes 1 s to send, where reading the shard again (1.1 MB) takes about 0.01 s.
    const slow = await staged('slow-link', [MiB, 100_000], 64 * MiB);
    const keepsOnly = (leaf: number): boolean => leaf === 0;
    expect(
      await dropHeldLeaves(slow.writer, slow.leaves, new Set([0]), keepsOnly, {
        sourceDir: scratch,
        uploadBytesPerSecond: 100_000,
      }),
    ).toBe(100_000);
    expect(await blocksIn(slow.writer.shards[0]?.file ?? '')).toEqual([
      slow.blocks[0]?.cid.toString(),
    ]);

    // Held: two leaves of 1 MiB beside one sent, two thirds of the shard. At 1 GB/s they take
    // 2 ms to send, where reading the 3 MiB shard again takes 30 ms.
    const fast = await staged('fast-link', [MiB, MiB, MiB], 64 * MiB);
    const before = fast.writer.shards[0];
    expect(
      await dropHeldLeaves(fast.writer, fast.leaves, new Set([0]), keepsOnly, {
        sourceDir: scratch,
        uploadBytesPerSecond: 1_000_000_000,
      }),
    ).toBe(0);
    expect(fast.writer.shards[0]).toEqual(before);
    expect(await blocksIn(before?.file ?? '')).toEqual(
      fast.blocks.map((block) => block.cid.toString()),
    );
  });

  it('sends a staged shard whole, held leaves and all, when it cannot be written again', async () => {
    const { blocks, leaves, writer } = await staged('unwritable', [MiB, MiB, 6], 64 * MiB);
    const [shard] = writer.shards;
    // Where the shard would be written again, a folder: opening it to write fails, as a full
    // disk makes writing fail.
    mkdirSync(`${shard?.file ?? ''}.kept`);
    const held = await dropHeldLeaves(writer, leaves, new Set([0]), (leaf) => leaf === 2, {
      sourceDir: scratch,
      uploadBytesPerSecond: undefined,
    });
    expect(held).toBe(0);
    expect(writer.shards[0]).toEqual(shard);
    expect(await blocksIn(shard?.file ?? '')).toEqual(blocks.map((block) => block.cid.toString()));
    expect(blocks.map((_, leaf) => writer.leafShards.shardOf(leaf))).toEqual([0, 0, 0]);
  });
});
