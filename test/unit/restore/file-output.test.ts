import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  constants,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  AlignedSlots,
  DirectWriter,
  openDirect,
  SLOT_BYTES,
} from '../../../main/direct-io/index.ts';
import {
  CarFormatError,
  cidText,
  rawCidOf,
  UncheckedCarBlock,
} from '../../../main/protocol/index.ts';
import { Hole } from '../../../main/restore/file-bytes.ts';
import { openFileOutput, type FileOutput } from '../../../main/restore/file-output.ts';
import { fsyncFully } from '../../../main/restore/file-writes.ts';
import { mountMemoryDisk } from '../../helpers/limited-disks.ts';

// A restored file's bytes through O_DIRECT from aligned slots, or through the page cache where
// the file system will not take O_DIRECT: either way the file holds exactly its bytes. The
// pieces come in sizes that are not whole disk blocks (as leaves of other tools' DAGs can),
// cross the slot's size, and end part-way through a block.

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-output-'));
});
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** Whether the descriptor writes with O_DIRECT, as the kernel reports its flags. */
function isDirect(fd: number): boolean {
  const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
  return (parseInt(flags?.[1] ?? '0', 8) & constants.O_DIRECT) !== 0;
}

/** 2.6 MiB in pieces of awkward sizes. */
function awkwardPieces(): Buffer[] {
  return [100_003, 4096, 1, SLOT_BYTES, 777, 1_500_000, 4095].map((size) => randomBytes(size));
}

/**
 * `bytes` as a leaf not yet checked, in two pieces; `lying` keeps the CID and flips a byte, as
 * a host's damaged copy would.
 */
async function uncheckedLeaf(bytes: Buffer, lying = false): Promise<UncheckedCarBlock> {
  const sent = Buffer.from(bytes);
  if (lying) sent[sent.length - 1] = (sent[sent.length - 1] ?? 0) ^ 1;
  const half = Math.floor(sent.length / 2);
  return new UncheckedCarBlock(
    await rawCidOf(bytes),
    [sent.subarray(0, half), sent.subarray(half)],
    sent.length,
    0,
  );
}

/** Writes `pieces` through `output`, in two calls as two leaves, then finishes and closes. */
async function writeAll(output: FileOutput, pieces: readonly Buffer[]): Promise<number> {
  const written = (await output.write(pieces.slice(0, 3))) + (await output.write(pieces.slice(3)));
  await output.finish();
  await fsyncFully(output.fd);
  output.close();
  return written;
}

describe('restored file output', () => {
  it('writes a large file with O_DIRECT, byte for byte, and hands its slot back', async () => {
    const slots = AlignedSlots.tryCreate(1);
    const file = path.join(scratch, 'direct.bin');
    const pieces = awkwardPieces();
    const output = openFileOutput(file, 0o600, 3 << 20, slots);
    expect(isDirect(output.fd)).toBe(true);
    expect(slots?.take()).toBeUndefined();
    expect(await writeAll(output, pieces)).toBe(Buffer.concat(pieces).length);
    expect(readFileSync(file).equals(Buffer.concat(pieces))).toBe(true);
    expect(slots?.take()).toBeDefined();
  });

  it('checks each unchecked leaf against its CID as it writes it, on every path', async () => {
    const slots = AlignedSlots.tryCreate(1);
    if (!slots) throw new Error('no aligned memory here');
    try {
      const leaves = [randomBytes(SLOT_BYTES), randomBytes(SLOT_BYTES), randomBytes(300_000)];
      // Whole leaves in the slot (hashed on the worker as the slot is written).
      const whole = path.join(scratch, 'checked-whole.bin');
      const output = openFileOutput(whole, 0o600, 2 * SLOT_BYTES + 300_000, slots);
      expect(isDirect(output.fd)).toBe(true);
      for (const leaf of leaves) await output.write(await uncheckedLeaf(leaf));
      await output.finish();
      output.close();
      expect(readFileSync(whole).equals(Buffer.concat(leaves))).toBe(true);

      const rejected = async (file: string, size: number, before: Buffer[], leaf: Buffer) => {
        const out = openFileOutput(path.join(scratch, file), 0o600, size, slots);
        try {
          for (const piece of before) await out.write([piece]);
          const lie = await uncheckedLeaf(leaf, true);
          const writing = out.write(lie);
          await expect(writing).rejects.toBeInstanceOf(CarFormatError);
          await expect(writing).rejects.toMatchObject({ mismatchedCid: cidText(lie.cid) });
        } finally {
          out.close();
        }
      };
      // A damaged leaf that fills the slot, one that ends part-way in it, one that does not fit
      // in what is left of it (hashed on this thread), and one in a small file (no slot).
      await rejected('whole.bin', 2 * SLOT_BYTES, [], randomBytes(SLOT_BYTES));
      await rejected('partial.bin', SLOT_BYTES, [randomBytes(4096)], randomBytes(300_000));
      await rejected(
        'straddling.bin',
        2 * SLOT_BYTES,
        [randomBytes(4096)],
        randomBytes(SLOT_BYTES),
      );
      await rejected('small.bin', 100_000, [], randomBytes(100_000));
      await rejected('medium.bin', 200_000, [], randomBytes(200_000));
      expect(slots.take()).toBeDefined();
    } finally {
      await slots.close();
    }
  });

  it.each([
    ['with O_DIRECT', true],
    ['through the page cache', false],
  ] as const)(
    'leaves holes where asked %s: the bytes read as zeros and take no room, also at the end',
    async (_, direct) => {
      const slots = direct ? AlignedSlots.tryCreate(1) : undefined;
      const file = path.join(scratch, `holes-${direct}.bin`);
      const MiB = 1 << 20;
      const first = randomBytes(MiB);
      const middle = randomBytes(MiB);
      const output = openFileOutput(file, 0o600, 5 * MiB, slots);
      expect(isDirect(output.fd)).toBe(direct);
      const parts = [[first], new Hole(MiB), [middle], new Hole(MiB), new Hole(MiB)] as const;
      let written = 0;
      for (const part of parts) written += await output.write(part);
      await output.finish();
      await fsyncFully(output.fd);
      output.close();
      expect(written).toBe(5 * MiB);
      const expected = Buffer.concat([first, Buffer.alloc(MiB), middle, Buffer.alloc(2 * MiB)]);
      expect(readFileSync(file).equals(expected)).toBe(true);
      // Two MiB of data, and no more than a few blocks besides.
      expect(statSync(file).blocks * 512).toBeLessThan(2 * MiB + 64 * 1024);
    },
  );

  it('writes a small file through the page cache, without a slot', async () => {
    const slots = AlignedSlots.tryCreate(1);
    const file = path.join(scratch, 'small.txt');
    const bytes = randomBytes(5000);
    const output = openFileOutput(file, 0o600, bytes.length, slots);
    expect(isDirect(output.fd)).toBe(false);
    await writeAll(output, [bytes]);
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(slots?.take()).toBeDefined();
  });

  it("rejects a small file's write that the disk has no room for, as any other write", async () => {
    const disk = mountMemoryDisk(path.join(scratch, 'full'), 'tmpfs', 1);
    try {
      writeFileSync(path.join(disk.dir, 'filler'), new Uint8Array(0));
      expect(() => appendFileSync(path.join(disk.dir, 'filler'), randomBytes(2 << 20))).toThrow(
        /ENOSPC/,
      );
      const output = openFileOutput(path.join(disk.dir, 'note.txt'), 0o600, 5000, undefined);
      const writing = output.write([randomBytes(5000)]);
      await expect(writing).rejects.toThrow(/ENOSPC/);
      output.close();
    } finally {
      disk.unmount();
    }
  });

  it('writes through the page cache where the file system refuses O_DIRECT (ramfs)', async () => {
    const disk = mountMemoryDisk(path.join(scratch, 'ramfs'), 'ramfs');
    try {
      const slots = AlignedSlots.tryCreate(1);
      const file = path.join(disk.dir, 'large.bin');
      const pieces = awkwardPieces();
      const output = openFileOutput(file, 0o600, 3 << 20, slots);
      expect(isDirect(output.fd)).toBe(false);
      await writeAll(output, pieces);
      expect(readFileSync(file).equals(Buffer.concat(pieces))).toBe(true);
      expect(slots?.take()).toBeDefined();
    } finally {
      disk.unmount();
    }
  });

  it('goes on through the page cache when the disk refuses a direct write', async () => {
    // One byte past a malloc'd buffer's start is aligned to nothing a disk accepts: the kernel
    // refuses the first write (EINVAL), as a disk with larger blocks than the slots' would.
    const misaligned = new Uint8Array(new ArrayBuffer(SLOT_BYTES + 1), 1, SLOT_BYTES);
    const file = path.join(scratch, 'refused.bin');
    const fd = openDirect(file, 0o600);
    if (fd === undefined) throw new Error(`${scratch} takes no O_DIRECT; this test needs it`);
    const writer = new DirectWriter(fd, file, misaligned);
    const pieces = awkwardPieces();
    await writer.write(pieces);
    await writer.finish();
    expect(isDirect(writer.fd)).toBe(false);
    await fsyncFully(writer.fd);
    closeSync(writer.fd);
    expect(readFileSync(file).equals(Buffer.concat(pieces))).toBe(true);
  });
});
