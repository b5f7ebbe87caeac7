import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { CID } from 'multiformats/cid';
import { describe, expect, it } from 'vitest';
import { buildFileNode, type LeafMaker } from '../../../main/packer/file-builder.ts';
import { oneLeafFileNode, plainFolderNode } from '../../../main/packer/node-bytes.ts';
import { balanced } from 'ipfs-unixfs-importer/layout';
import { cidText, DAG_PB_CODEC, RAW_CODEC, sha256CidOf } from '../../../main/protocol/index.ts';
import { memoryBlockstore } from '../../helpers/memory-blockstore.ts';
import fc from 'fast-check';
import { HOSTILE_INPUT_RUNS } from '../../helpers/hostile-runs.ts';

// The nodes written byte by byte must be those the UnixFS and dag-pb libraries make, for every
// mode, time and size a file system gives: one byte off and every CID above it changes.

const MODES = [0o644, 0o755, 0o600, 0o640, 0o4755, 0o7777, 0o100644, 0];
const TIMES = [
  { secs: 0n, nsecs: 0 },
  { secs: 1_700_000_000n, nsecs: 123_456_789 },
  { secs: 127n, nsecs: 999_999_999 },
  { secs: 128n, nsecs: 1 },
  // Before 1970: a negative int64 takes ten bytes.
  { secs: -1n, nsecs: 500_000_000 },
  { secs: -315_619_200n, nsecs: 0 },
  { secs: 2n ** 40n, nsecs: 7 },
];
const SIZES = [0, 1, 127, 128, 16_383, 16_384, 262_143, 1_048_575, 1_048_576];

/** The File node of one leaf as the reducer (checked against the stock importer) makes it. */
async function referenceFileNode(
  meta: { mode: number; mtime: { secs: bigint; nsecs: number } },
  leaf: { cid: CID; size: number },
) {
  const store = memoryBlockstore();
  async function* oneLeaf(): AsyncGenerator<LeafMaker> {
    await Promise.resolve();
    yield () => Promise.resolve({ cid: leaf.cid, size: BigInt(leaf.size) });
  }
  const made = await buildFileNode(meta, oneLeaf(), store, balanced({ maxChildrenPerNode: 1024 }));
  return { cid: made.cid, size: Number(made.size), bytes: store.blocks.get(cidText(made.cid)) };
}

function referenceFolderNode(
  meta: { mode: number; mtime: { secs: bigint; nsecs: number } },
  links: ReadonlyArray<{ name: string; cid: CID; size: number }>,
) {
  const data = new UnixFS({ type: 'directory', mode: meta.mode, mtime: meta.mtime }).marshal();
  const bytes = dagPb.encode(
    dagPb.prepare({
      Data: data,
      Links: links.map((link) => ({ Name: link.name, Hash: link.cid, Tsize: link.size })),
    }),
  );
  const size = links.reduce((sum, link) => sum + link.size, bytes.length);
  return { cid: sha256CidOf(DAG_PB_CODEC, bytes), bytes, size };
}

const leafOf = (size: number) => ({
  cid: sha256CidOf(RAW_CODEC, new Uint8Array(size).fill(size % 251)),
  size,
});

describe('oneLeafFileNode', () => {
  it('writes the bytes, CID and size the libraries give, for every mode, time and size', async () => {
    let compared = 0;
    for (const mode of MODES)
      for (const mtime of TIMES)
        for (const size of SIZES) {
          const leaf = leafOf(size);
          const ours = oneLeafFileNode({ mode, mtime }, leaf);
          const reference = await referenceFileNode({ mode, mtime }, leaf);
          expect(Buffer.from(ours.bytes).toString('hex')).toBe(
            Buffer.from(reference.bytes ?? []).toString('hex'),
          );
          expect(cidText(ours.cid)).toBe(cidText(reference.cid));
          expect(ours.size).toBe(reference.size);
          compared += 1;
        }
    expect(compared).toBe(MODES.length * TIMES.length * SIZES.length);
  });
});

describe('plainFolderNode', () => {
  // Names whose UTF-8 byte order differs from JavaScript's string order: U+FF5E is one unit
  // above a surrogate pair in UTF-16, and below it in UTF-8.
  const NAMES = ['', 'A', 'a', 'a b', 'ab', 'café', 'cafe\u0301', 'line\nbreak', '\uFF5E', '😀'];
  const linksOf = (names: readonly string[]) =>
    names.map((name, index) => ({
      name,
      cid: index % 2 === 0 ? leafOf(index).cid : sha256CidOf(DAG_PB_CODEC, Buffer.from(name)),
      size: [0, 1, 127, 128, 300_000, 2 ** 40][index % 6] ?? 0,
    }));

  it('writes the bytes, CID and size the libraries give, for any mode and time', () => {
    const names = [...NAMES].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    for (const mode of MODES)
      for (const mtime of TIMES)
        for (const links of [[], linksOf(names.slice(0, 1)), linksOf(names)]) {
          const ours = plainFolderNode({ mode, mtime }, links);
          const reference = referenceFolderNode({ mode, mtime }, links);
          expect(ours).toBeDefined();
          expect(Buffer.from(ours?.bytes ?? []).toString('hex')).toBe(
            Buffer.from(reference.bytes).toString('hex'),
          );
          expect(cidText(ours?.cid ?? reference.cid)).toBe(cidText(reference.cid));
          expect(ours?.size).toBe(reference.size);
        }
  });

  it('declines names out of UTF-8 byte order, which dag-pb would sort', () => {
    const meta = { mode: 0o755, mtime: { secs: 1n, nsecs: 0 } };
    // In JavaScript's order, and so out of UTF-8's.
    const jsOrder = ['😀', '\uFF5E'];
    expect([...jsOrder].sort()).toEqual(jsOrder);
    expect(plainFolderNode(meta, linksOf(jsOrder))).toBeUndefined();
    expect(plainFolderNode(meta, linksOf(['b', 'a']))).toBeUndefined();
  });

  it('writes the bytes the libraries give for any names, mode and time a folder has', () => {
    const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
    const names = fc.uniqueArray(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }), {
      maxLength: 12,
    });
    const meta = fc.record({
      mode: fc.nat({ max: 0o7777 }),
      mtime: fc.record({
        // ipfs-unixfs writes some seconds from 2^31 on wrong (main/packer/unixfs-data.ts, whose
        // tests check those).
        secs: fc.bigInt({ min: -(2n ** 31n), max: 2n ** 31n - 1n }),
        nsecs: fc.nat({ max: 999_999_999 }),
      }),
    });
    fc.assert(
      fc.property(meta, names, (folder, given) => {
        const sorted = [...given].sort(byUtf8);
        const links = linksOf(sorted);
        const reference = referenceFolderNode(folder, links);
        const ours = plainFolderNode(folder, links);
        expect(Buffer.from(ours?.bytes ?? []).toString('hex')).toBe(
          Buffer.from(reference.bytes).toString('hex'),
        );
        expect(ours?.size).toBe(reference.size);
        // Given in another order, they are left to dag-pb to sort.
        const inOrder = given.every(
          (name, index) => index === 0 || byUtf8(given[index - 1]!, name) < 0,
        );
        expect(plainFolderNode(folder, linksOf(given)) === undefined).toBe(!inOrder);
      }),
      { seed: HOSTILE_INPUT_RUNS.seed, numRuns: Math.ceil(HOSTILE_INPUT_RUNS.numRuns / 10) },
    );
  });
});
