import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  CarFormatError,
  encodeVarint,
  readCar,
  readCarCheckingLater,
  type CarItem,
  UncheckedCarBlock,
} from '../../../main/protocol/index.ts';
import { carBytes, carV2, cborBlock, rawBlock } from '../../helpers/cars.ts';

// eslint-disable-next-line @typescript-eslint/require-await -- a stream source, async by contract
async function* chunked(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < bytes.length; offset += size)
    yield bytes.subarray(offset, offset + size);
}

async function readAll(bytes: Uint8Array, allowV2 = false, chunk = 7): Promise<CarItem[]> {
  const items: CarItem[] = [];
  for await (const item of readCar(chunked(bytes, chunk), { maxBlockBytes: 4096, allowV2 }))
    items.push(item);
  return items;
}

describe('readCar', () => {
  it('reads what @ipld/car writes, block by block, across any chunking', async () => {
    const blocks = [
      await rawBlock(),
      await rawBlock(new Uint8Array(0)),
      await rawBlock(new Uint8Array(4096)),
    ];
    const car = await carBytes([blocks[0]?.cid ?? blocks[1]!.cid], blocks);
    for (const chunk of [1, 7, 4096, car.length]) {
      const items = await readAll(car, false, chunk);
      expect(items[0]).toMatchObject({ type: 'header', version: 1 });
      expect(
        items.slice(1).map((item) => (item.type === 'block' ? item.cid.toString() : '')),
      ).toEqual(blocks.map((b) => b.cid.toString()));
      // Each block's bytes, whether taken in the pieces they arrived in or as one buffer.
      for (const [index, item] of items.slice(1).entries()) {
        const expected = Buffer.from(blocks[index]?.bytes ?? []);
        if (item.type !== 'block') throw new Error(`item ${index + 1} is not a block`);
        expect(item.length).toBe(expected.length);
        expect(Buffer.concat(item.pieces).equals(expected)).toBe(true);
        expect(Buffer.from(item.bytes).equals(expected)).toBe(true);
      }
    }
  });

  it('reads the inner CARv1 of a CARv2 only where allowed', async () => {
    const block = await rawBlock();
    const inner = await carBytes([block.cid], [block]);
    const v2 = carV2(inner, 13);
    const items = await readAll(v2, true);
    expect(items[0]).toMatchObject({ type: 'header', version: 2 });
    expect(items).toHaveLength(2);
    await expect(readAll(v2, false)).rejects.toThrow(CarFormatError);
  });

  it('refuses a block over the limit before reading it, as block_too_large', async () => {
    const big = await carBytes([], [await rawBlock(new Uint8Array(4097))]);
    await expect(readAll(big)).rejects.toMatchObject({ kind: 'block_too_large' });
  });

  it('checks small and 1 MiB blocks against their CIDs alike', async () => {
    const read = async (car: Uint8Array): Promise<CarItem[]> => {
      const items: CarItem[] = [];
      for await (const item of readCar(chunked(car, 65_536), { maxBlockBytes: 1 << 20 }))
        items.push(item);
      return items;
    };
    for (const size of [1024, 1 << 20]) {
      const honest = await rawBlock(randomBytes(size));
      expect(await read(await carBytes([honest.cid], [honest]))).toHaveLength(2);
      const bytes = Buffer.from(honest.bytes);
      bytes[size - 1] = (bytes[size - 1] ?? 0) ^ 1;
      const lying = { cid: honest.cid, bytes };
      await expect(read(await carBytes([honest.cid], [lying]))).rejects.toMatchObject({
        kind: 'malformed',
        message: expect.stringContaining('do not match') as unknown,
      });
    }
  });

  it('leaves only large raw blocks unchecked when asked, and their check still catches a lie', async () => {
    const small = await rawBlock(randomBytes(1000));
    const large = await rawBlock(randomBytes(70_000));
    const node = await cborBlock({ large: 'x'.repeat(70_000) });
    const lyingBytes = Buffer.from(large.bytes);
    lyingBytes[0] = (lyingBytes[0] ?? 0) ^ 1;
    const lying = { cid: large.cid, bytes: lyingBytes };
    const read = async (blocks: Parameters<typeof carBytes>[1]) => {
      const items = [];
      const car = await carBytes([], blocks);
      for await (const item of readCarCheckingLater(
        chunked(car, 4096),
        { maxBlockBytes: 1 << 20 },
        65_536,
      ))
        items.push(item);
      return items.slice(1);
    };
    const [smallItem, largeItem, nodeItem, lyingItem] = await read([small, large, node, lying]);
    expect(smallItem?.type).toBe('block');
    // A dag-cbor block of that size is still checked here: only raw leaves are file bytes.
    expect(nodeItem?.type).toBe('block');
    if (!(largeItem instanceof UncheckedCarBlock) || !(lyingItem instanceof UncheckedCarBlock))
      throw new Error('the large raw blocks came checked');
    expect(Buffer.from(largeItem.expectedDigest).equals(large.cid.multihash.digest)).toBe(true);
    expect(Buffer.concat(largeItem.check().pieces).equals(large.bytes)).toBe(true);
    expect(() => lyingItem.check()).toThrow(CarFormatError);
    expect(() => lyingItem.check()).toThrow(`block bytes do not match ${large.cid.toString()}`);
    // A lying small block still stops the read, as readCar does.
    const smallLie = { cid: small.cid, bytes: randomBytes(1000) };
    await expect(read([smallLie])).rejects.toMatchObject({ mismatchedCid: small.cid.toString() });
  });

  it('refuses a block CID spelt with a longer varint, or of a codec §3 does not allow', async () => {
    const block = await rawBlock();
    const car = await carBytes([block.cid], [block]);
    const section = (cid: Uint8Array): Buffer =>
      Buffer.concat([encodeVarint(cid.length + block.bytes.length), cid, block.bytes]);
    const header = car.subarray(0, car.length - section(block.cid.bytes).length);
    const digest = block.cid.multihash.digest;
    // The raw codec (0x55) as a two-byte varint, then dag-json (0x0129), a real two-byte codec.
    for (const [cid, message] of [
      [Buffer.from([0x01, 0xd5, 0x00, 0x12, 0x20, ...digest]), /non-minimal varint/],
      [Buffer.from([0x01, 0xa9, 0x02, 0x12, 0x20, ...digest]), /^block CID breaks §3$/],
    ] as const) {
      await expect(readAll(Buffer.concat([header, section(cid)]))).rejects.toMatchObject({
        kind: 'malformed',
        message: expect.stringMatching(message) as unknown,
      });
    }
    // The same framing with the CID as §3 spells it is read.
    expect((await readAll(Buffer.concat([header, section(block.cid.bytes)]))).length).toBe(2);
  });

  it('refuses truncation, trailing garbage, non-minimal varints and empty input as malformed', async () => {
    const block = await rawBlock();
    const car = await carBytes([block.cid], [block]);
    for (const bad of [
      car.subarray(0, car.length - 1),
      Buffer.concat([car, Buffer.from([0x01])]),
      Buffer.concat([Buffer.from([0x80, 0x00]), car]),
      new Uint8Array(0),
      Buffer.concat([encodeVarint(3), Buffer.from([0xa0, 0xa0, 0xa0])]),
    ]) {
      await expect(readAll(bad)).rejects.toMatchObject({ kind: 'malformed' });
    }
  });
});

describe('readCar on a CAR cut short', () => {
  it('reads the whole sections before the cut and refuses a cut inside one, however it is chunked', async () => {
    const blocks = [
      await rawBlock(randomBytes(30)),
      await rawBlock(new Uint8Array(0)),
      await rawBlock(randomBytes(100)),
    ];
    const car = await carBytes([blocks[0]!.cid], blocks);
    // Where each section ends: after the header, then after each block's varint, CID and bytes.
    const sectionBytes = blocks.map((block) => {
      const length = block.cid.bytes.length + block.bytes.length;
      return encodeVarint(length).length + length;
    });
    const headerEnd = car.length - sectionBytes.reduce((sum, bytes) => sum + bytes, 0);
    const ends = sectionBytes.map(
      (_, index) => headerEnd + sectionBytes.slice(0, index + 1).reduce((sum, n) => sum + n, 0),
    );
    for (const chunk of [1, 7, 64, car.length]) {
      for (let cut = headerEnd; cut < car.length; cut += 1) {
        const read = readAll(car.subarray(0, cut), false, chunk);
        const whole = [headerEnd, ...ends].indexOf(cut);
        if (whole === -1)
          await expect(read, `cut at ${cut}`).rejects.toBeInstanceOf(CarFormatError);
        else expect((await read).length, `cut at ${cut}`).toBe(1 + whole);
      }
    }
  });
});

describe('encodeCar', () => {
  it('writes CARs that @ipld/car reads back block for block', async () => {
    const { CarReader } = await import('@ipld/car');
    const { encodeCar } = await import('../../../main/protocol/index.ts');
    const blocks = [await rawBlock(), await rawBlock(new Uint8Array(0))];
    const reader = await CarReader.fromBytes(encodeCar([blocks[0]!.cid], blocks));
    expect((await reader.getRoots()).map(String)).toEqual([blocks[0]!.cid.toString()]);
    const read = [];
    for await (const block of reader.blocks()) read.push(block.cid.toString());
    expect(read).toEqual(blocks.map((block) => block.cid.toString()));
  });
});
