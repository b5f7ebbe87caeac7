import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import * as dagPb from '@ipld/dag-pb';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { afterAll, describe, expect, it } from 'vitest';
import { cidText, DAG_PB_CODEC, readCar } from '../../../main/protocol/index.ts';
import { MetadataCarFile, MetadataOverLimit } from '../../../main/uploader/metadata-car-file.ts';
import { nodeIndexFileOf } from '../../../main/state/index.ts';
import { readTreeIndex, readTreeIndexOfFile } from '../../../main/uploader/index.ts';
import { openBrowsableTree } from '../../../main/uploader/browsable-tree.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-metadata-car-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A dag-pb node carrying `data`. */
async function pbNode(data: Uint8Array) {
  const bytes = dagPb.encode({ Data: data, Links: [] });
  return { cid: CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes)), bytes };
}

async function* chunksOf(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield await Promise.resolve(bytes);
}

describe('MetadataCarFile', () => {
  it('writes a CAR rooted at the manifest, each node once, from nodes given at once', async () => {
    const file = path.join(scratch, 'one.car');
    const car = await MetadataCarFile.create(file);
    // Small nodes past the 1 MiB write buffer, one larger than it, and a node given twice.
    const nodes = await Promise.all(
      Array.from({ length: 3000 }, (_, index) => pbNode(Buffer.alloc(700, index % 251))),
    );
    nodes.push(await pbNode(Buffer.alloc(1_500_000, 7)));
    // Given at once, as the packer gives several files' nodes.
    await Promise.all([
      ...nodes.map((node) => car.put(node.cid, node.bytes)),
      car.put(nodes[5]?.cid ?? CID.parse(''), nodes[5]?.bytes ?? new Uint8Array()),
    ]);
    const distinct = new Set(nodes.map((node) => cidText(node.cid)));
    const manifestBytes = dagCbor.encode({ version: 1, root: nodes[0]?.cid });
    const manifestCid = CID.createV1(dagCbor.code, await sha256.digest(manifestBytes));
    const size = await car.finish(manifestCid, manifestBytes);

    const bytes = readFileSync(file);
    expect(bytes.length).toBe(size);
    const seen: string[] = [];
    for await (const item of readCar(chunksOf(bytes), { maxBlockBytes: 4 * 1024 * 1024 })) {
      if (item.type === 'header') expect(item.roots.map(cidText)).toEqual([cidText(manifestCid)]);
      else seen.push(cidText(item.cid));
    }
    expect(seen).toHaveLength(distinct.size + 1);
    expect(new Set(seen)).toEqual(new Set([...distinct, cidText(manifestCid)]));
    // What a later backup and the browser read it with.
    expect((await readTreeIndex(bytes)).manifest['version']).toBe(1);

    // The index of its nodes, written beside it, is the one the browser would make by reading
    // the CAR whole, byte for byte.
    const index = nodeIndexFileOf(file);
    const written = readFileSync(index);
    rmSync(index);
    (await openBrowsableTree(file)).close();
    expect(readFileSync(index).equals(written)).toBe(true);
    const browsed = await openBrowsableTree(file);
    try {
      expect(browsed.manifest['version']).toBe(1);
      for (const node of nodes.slice(2990))
        expect(Buffer.from(browsed.nodes.get(node.cid) ?? []).equals(node.bytes)).toBe(true);
    } finally {
      browsed.close();
    }
  });

  it('removes its file when abandoned, finished or not, and never writes over a file', async () => {
    const node = await pbNode(Buffer.from('node'));
    const unfinished = path.join(scratch, 'unfinished.car');
    const car = await MetadataCarFile.create(unfinished);
    await car.put(node.cid, node.bytes);
    expect(existsSync(nodeIndexFileOf(unfinished))).toBe(true);
    await car.abandon();
    expect(existsSync(unfinished)).toBe(false);
    expect(existsSync(nodeIndexFileOf(unfinished))).toBe(false);

    const finished = path.join(scratch, 'finished.car');
    const done = await MetadataCarFile.create(finished);
    const manifestBytes = dagCbor.encode({ version: 1 });
    await done.finish(
      CID.createV1(dagCbor.code, await sha256.digest(manifestBytes)),
      manifestBytes,
    );
    await expect(MetadataCarFile.create(finished)).rejects.toMatchObject({ code: 'EEXIST' });
    await done.abandon();
    expect(existsSync(finished)).toBe(false);
    expect(existsSync(nodeIndexFileOf(finished))).toBe(false);
  });
});

describe('MetadataCarFile, limited', () => {
  it('makes a CAR of exactly its limit, and refuses the node that would pass it', async () => {
    const nodes = await Promise.all(
      Array.from({ length: 10 }, (_, index) => pbNode(Buffer.alloc(1000, index))),
    );
    const manifestBytes = dagCbor.encode({ version: 1, root: nodes[0]?.cid });
    const manifestCid = CID.createV1(dagCbor.code, await sha256.digest(manifestBytes));
    // The size of the CAR of all ten nodes, made without a limit.
    const whole = await MetadataCarFile.create(path.join(scratch, 'whole.car'));
    for (const node of nodes) await whole.put(node.cid, node.bytes);
    const size = await whole.finish(manifestCid, manifestBytes);

    const exact = await MetadataCarFile.create(path.join(scratch, 'exact.car'), size);
    for (const node of nodes) await exact.put(node.cid, node.bytes);
    expect(await exact.finish(manifestCid, manifestBytes)).toBe(size);

    // One byte less: the manifest no longer fits.
    const short = await MetadataCarFile.create(path.join(scratch, 'short.car'), size - 1);
    for (const node of nodes) await short.put(node.cid, node.bytes);
    await expect(short.finish(manifestCid, manifestBytes)).rejects.toBeInstanceOf(
      MetadataOverLimit,
    );

    // Half of it: the sixth node is refused, and so is everything after it.
    const file = path.join(scratch, 'half.car');
    const half = await MetadataCarFile.create(file, Math.floor(size / 2));
    const outcomes: Array<PromiseSettledResult<void>> = [];
    for (const node of nodes)
      outcomes.push(...(await Promise.allSettled([half.put(node.cid, node.bytes)])));
    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      ...Array<string>(5).fill('fulfilled'),
      ...Array<string>(5).fill('rejected'),
    ]);
    expect(outcomes[5]).toMatchObject({ reason: { limitBytes: Math.floor(size / 2) } });
    await expect(half.put(nodes[0]?.cid ?? manifestCid, new Uint8Array())).resolves.toBe(undefined);
    await expect(half.finish(manifestCid, manifestBytes)).rejects.toBeInstanceOf(MetadataOverLimit);
    await half.abandon();
    expect(existsSync(file)).toBe(false);
    expect(existsSync(nodeIndexFileOf(file))).toBe(false);
  });
});

describe('readTreeIndexOfFile', () => {
  it('reads each node from the CAR file when asked, as it was put, until closed', async () => {
    const file = path.join(scratch, 'read-back.car');
    const car = await MetadataCarFile.create(file);
    const nodes = await Promise.all(
      Array.from({ length: 2000 }, (_, index) => pbNode(Buffer.alloc(300 + index, index % 251))),
    );
    nodes.push(await pbNode(Buffer.alloc(1_500_000, 9)));
    for (const node of nodes) await car.put(node.cid, node.bytes);
    const manifestBytes = dagCbor.encode({ version: 1, root: nodes[0]?.cid });
    await car.finish(CID.createV1(dagCbor.code, await sha256.digest(manifestBytes)), manifestBytes);

    const tree = await readTreeIndexOfFile(file);
    // Moved, as a pulled CAR is moved into the cache once read: the open file still serves.
    const moved = path.join(scratch, 'read-back-moved.car');
    renameSync(file, moved);
    for (const node of nodes) {
      expect(Buffer.from(tree.nodes.get(node.cid) ?? []).equals(node.bytes)).toBe(true);
      expect(tree.nodes.getByText(cidText(node.cid))?.length).toBe(node.bytes.length);
    }
    const absent = await pbNode(Buffer.from('not in this tree'));
    expect(tree.nodes.get(absent.cid)).toBeUndefined();
    tree.close();
    expect(() => tree.nodes.get(nodes[0]?.cid ?? absent.cid)).toThrow(/after closing/);
  });
});
