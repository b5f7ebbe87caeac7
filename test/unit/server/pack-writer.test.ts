import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AlignedSlots } from '../../../main/direct-io/index.ts';
import { PackWriter } from '../../../server/blocks/pack-writer.ts';
import { mountMemoryDisk } from '../../helpers/limited-disks.ts';

// A pack's blocks go to disk with O_DIRECT from an aligned slot when one is free and the file
// system takes it, else through the page cache. Either way each block lies at the offset
// `append` gave it and the file ends with the last block; a full disk fails the pack with the
// disk's error, and the slot comes back however the pack ends.

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-writer-'));
});
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** 3.4 MiB of blocks whose sizes are not whole disk blocks and cross the 1 MiB batches. */
function awkwardBlocks(): Buffer[] {
  return [1, 100_003, 4096, 1 << 20, 777, 1_500_000, 4095, 650_000].map((size) =>
    randomBytes(size),
  );
}

/** Appends the blocks (every other one in two pieces, as a socket delivers them). */
async function appendAll(pack: PackWriter, blocks: readonly Buffer[]): Promise<number[]> {
  const offsets: number[] = [];
  for (const [index, block] of blocks.entries()) {
    const half = index % 2 === 1 ? block.length >> 1 : block.length;
    offsets.push(pack.append(block.subarray(0, half), block.subarray(half)));
    await pack.ready();
  }
  return offsets;
}

function expectPackHolds(pack: PackWriter, blocks: readonly Buffer[], offsets: number[]): void {
  const bytes = readFileSync(pack.file);
  expect(bytes.length).toBe(blocks.reduce((sum, block) => sum + block.length, 0));
  expect(pack.length).toBe(bytes.length);
  for (const [index, block] of blocks.entries()) {
    const offset = offsets[index] ?? -1;
    expect(bytes.subarray(offset, offset + block.length).equals(block)).toBe(true);
  }
}

function newFolder(name: string): string {
  return mkdtempSync(path.join(scratch, `${name}-`));
}

describe('pack writer', () => {
  it('writes a pack with O_DIRECT, each block at its offset, and hands its slot back', async () => {
    const slots = AlignedSlots.tryCreate(1);
    const pack = await PackWriter.create(scratch, slots);
    expect(pack.isDirect).toBe(true);
    expect(slots?.take()).toBeUndefined();
    const blocks = awkwardBlocks();
    const offsets = await appendAll(pack, blocks);
    await pack.finish();
    expectPackHolds(pack, blocks, offsets);
    expect(slots?.take()).toBeDefined();
  });

  it('writes a pack beyond the free slots through the page cache, beside a direct one', async () => {
    const slots = AlignedSlots.tryCreate(1);
    const first = await PackWriter.create(scratch, slots);
    const second = await PackWriter.create(scratch, slots);
    expect([first.isDirect, second.isDirect]).toEqual([true, false]);
    const firstBlocks = awkwardBlocks();
    const secondBlocks = awkwardBlocks();
    const [firstOffsets, secondOffsets] = await Promise.all([
      appendAll(first, firstBlocks),
      appendAll(second, secondBlocks),
    ]);
    await Promise.all([first.finish(), second.finish()]);
    expectPackHolds(first, firstBlocks, firstOffsets);
    expectPackHolds(second, secondBlocks, secondOffsets);
  });

  it('writes through the page cache where the file system refuses O_DIRECT (ramfs), leaving no stray file', async () => {
    const disk = mountMemoryDisk(newFolder('ramfs'), 'ramfs');
    try {
      const slots = AlignedSlots.tryCreate(1);
      const pack = await PackWriter.create(disk.dir, slots);
      expect(pack.isDirect).toBe(false);
      const slot = slots?.take();
      expect(slot).toBeDefined();
      if (slot) slots?.give(slot);
      const blocks = awkwardBlocks();
      const offsets = await appendAll(pack, blocks);
      await pack.finish();
      expectPackHolds(pack, blocks, offsets);
      expect(readdirSync(disk.dir)).toEqual([path.basename(pack.file)]);
    } finally {
      disk.unmount();
    }
  });

  it.each([
    ['with O_DIRECT', 1],
    ['through the page cache', 0],
  ])(
    'fails a pack %s on a full disk with the disk error, and discarding it leaves nothing',
    async (_how, slotCount) => {
      const disk = mountMemoryDisk(newFolder(`full-${slotCount}`), 'tmpfs', 2);
      try {
        const slots = slotCount > 0 ? AlignedSlots.tryCreate(slotCount) : undefined;
        const pack = await PackWriter.create(disk.dir, slots);
        // This kernel's tmpfs takes O_DIRECT (Linux 6.6 and later), so the direct path is tried.
        expect(pack.isDirect).toBe(slotCount > 0);
        const failure = await (async () => {
          await appendAll(pack, awkwardBlocks());
          await pack.finish();
        })().then(
          () => undefined,
          (error: unknown) => error as NodeJS.ErrnoException,
        );
        expect(failure?.code).toBe('ENOSPC');
        await pack.discard();
        expect(readdirSync(disk.dir)).toEqual([]);
        if (slots) expect(slots.take()).toBeDefined();
      } finally {
        disk.unmount();
      }
    },
  );
});
