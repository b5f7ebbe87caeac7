import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { CarReader } from '@ipld/car/reader';
import fc from 'fast-check';
import { CarFormatError, readCar, type CarItem } from '../../../main/protocol/index.ts';
import { carBytes, carV2, cborBlock, rawBlock, type Block } from '../../helpers/cars.ts';
import { byteChanges, changed } from '../../helpers/byte-damage.ts';
import { HOSTILE_INPUT_RUNS } from '../../helpers/hostile-runs.ts';

// readCar reads CARs by hand, from a stream, for shards and metadata a server or client sends.
// A CAR it takes must be one @ipld/car reads too, with the same roots and blocks: a hostile or
// damaged one must not mean one thing to Canopy and another to every other CAR tool. And what
// it refuses, it refuses as malformed (a 400, or a version found damaged), never with an error
// of its own making. The CARs here are written by @ipld/car, then cut, spliced and flipped, and
// arrive in chunks of any size.

const block = fc.oneof(
  fc.uint8Array({ maxLength: 40 }).map((bytes) => rawBlock(bytes)),
  fc.dictionary(fc.string({ maxLength: 4 }), fc.integer()).map((value) => cborBlock(value)),
);
const car = fc.record({
  blocks: fc.array(block, { maxLength: 4 }),
  roots: fc.nat({ max: 2 }),
  v2Padding: fc.option(fc.nat({ max: 8 })),
  changes: byteChanges(3),
  chunk: fc.integer({ min: 1, max: 64 }),
});

type CarInput = typeof car extends fc.Arbitrary<infer Input> ? Input : never;

async function carOf(input: CarInput): Promise<Uint8Array> {
  const blocks: Block[] = await Promise.all(input.blocks);
  const v1 = await carBytes(
    blocks.slice(0, input.roots).map((each) => each.cid),
    blocks,
  );
  return changed(input.v2Padding === null ? v1 : carV2(v1, input.v2Padding), input.changes);
}

// eslint-disable-next-line @typescript-eslint/require-await -- a stream source, async by contract
async function* chunked(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < bytes.length; offset += size)
    yield bytes.subarray(offset, offset + size);
}

describe('readCar against @ipld/car', () => {
  it('takes no CAR @ipld/car reads otherwise, and refuses the rest as malformed', async () => {
    await fc.assert(
      fc.asyncProperty(car, async (input) => {
        const bytes = await carOf(input);
        const items: CarItem[] = [];
        try {
          for await (const item of readCar(chunked(bytes, input.chunk), {
            maxBlockBytes: 1024,
            allowV2: true,
          }))
            items.push(item);
        } catch (error) {
          expect(error, Buffer.from(bytes).toString('hex')).toBeInstanceOf(CarFormatError);
          return;
        }
        const reference = await CarReader.fromBytes(bytes);
        const [header, ...blocks] = items;
        expect(header?.type).toBe('header');
        if (header?.type !== 'header') return;
        expect(header.roots.map(String)).toEqual((await reference.getRoots()).map(String));
        const expected: Array<[string, string]> = [];
        for await (const each of reference.blocks())
          expected.push([each.cid.toString(), Buffer.from(each.bytes).toString('hex')]);
        expect(
          blocks.map((each) =>
            each.type === 'block'
              ? [each.cid.toString(), Buffer.from(each.bytes).toString('hex')]
              : ['', ''],
          ),
        ).toEqual(expected);
        // @ipld/car does not hash blocks: each taken is checked here against its CID.
        for (const each of blocks)
          if (each.type === 'block')
            expect(createHash('sha256').update(each.bytes).digest()).toEqual(
              Buffer.from(each.cid.multihash.digest),
            );
      }),
      { seed: HOSTILE_INPUT_RUNS.seed, numRuns: Math.ceil(HOSTILE_INPUT_RUNS.numRuns / 10) },
    );
  });
});
