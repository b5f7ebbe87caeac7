import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import * as dagPb from '@ipld/dag-pb';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { afterAll, describe, expect, it } from 'vitest';
import { DAG_PB_CODEC } from '../../../main/protocol/index.ts';
import { MetadataCarFile } from '../../../main/uploader/metadata-car-file.ts';
import { nodeIndexFileOf } from '../../../main/state/index.ts';
import { openBrowsableTree } from '../../../main/uploader/index.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-browsable-tree-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Node {
  readonly cid: CID;
  readonly bytes: Uint8Array;
}

/** A dag-pb node carrying `data`. */
async function pbNode(data: Uint8Array): Promise<Node> {
  const bytes = dagPb.encode({ Data: data, Links: [] });
  return { cid: CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes)), bytes };
}

/**
 * A metadata CAR of `count` small nodes and one past the reader's 64 KiB chunks, and its
 * manifest; as a pulled CAR comes, without the index of its nodes a backup writes beside its
 * own.
 */
async function metadataCar(name: string, count = 500): Promise<{ file: string; nodes: Node[] }> {
  const file = path.join(scratch, name);
  const car = await MetadataCarFile.create(file);
  const nodes = await Promise.all(
    Array.from({ length: count }, (_, index) => pbNode(Buffer.alloc(200 + index, index % 251))),
  );
  nodes.push(await pbNode(Buffer.alloc(100_000, 3)));
  for (const node of nodes) await car.put(node.cid, node.bytes);
  const manifestBytes = dagCbor.encode({ version: 1, root: nodes[0]?.cid });
  await car.finish(CID.createV1(dagCbor.code, await sha256.digest(manifestBytes)), manifestBytes);
  rmSync(nodeIndexFileOf(file));
  return { file, nodes };
}

/** Opens the tree of `file`, reads every node back and closes it. */
async function readAll(file: string, nodes: readonly Node[]): Promise<Record<string, unknown>> {
  const tree = await openBrowsableTree(file);
  try {
    for (const node of nodes)
      expect(Buffer.from(tree.nodes.get(node.cid) ?? []).equals(node.bytes)).toBe(true);
    return tree.manifest;
  } finally {
    tree.close();
  }
}

/** `file` with one byte changed within `node`'s bytes. */
function damage(file: string, node: Node): void {
  const bytes = readFileSync(file);
  const at = bytes.indexOf(Buffer.from(node.bytes));
  expect(at).toBeGreaterThan(0);
  const last = at + node.bytes.length - 1;
  bytes[last] = (bytes[last] ?? 0) ^ 0xff;
  writeFileSync(file, bytes);
}

describe('openBrowsableTree', () => {
  it('reads a CAR whole the first time and keeps the index of its nodes, which later opens read instead', async () => {
    const { file, nodes } = await metadataCar('indexed.car');
    expect(existsSync(nodeIndexFileOf(file))).toBe(false);
    const first = await readAll(file, nodes);
    expect(first['version']).toBe(1);
    expect(existsSync(nodeIndexFileOf(file))).toBe(true);

    // Once the index is there, a node damaged on the disk does not stop the tree opening (the
    // CAR is not read whole), but reading that node says the metadata is damaged.
    const damaged = nodes[7] as Node;
    damage(file, damaged);
    const tree = await openBrowsableTree(file);
    expect(tree.manifest).toEqual(first);
    expect(
      Buffer.from(tree.nodes.get((nodes[8] as Node).cid) ?? []).equals((nodes[8] as Node).bytes),
    ).toBe(true);
    expect(() => tree.nodes.get(damaged.cid)).toThrow(/damaged: node .* does not match its CID/);
    tree.close();

    // Without the index, the CAR is read whole, and the same damage refuses the tree at once.
    rmSync(nodeIndexFileOf(file));
    await expect(openBrowsableTree(file)).rejects.toMatchObject({ code: 'protocol' });
    expect(existsSync(nodeIndexFileOf(file))).toBe(false);
  });

  it('ignores an index cut short, or one of another CAR, and writes it anew', async () => {
    const { file, nodes } = await metadataCar('reindexed.car');
    await readAll(file, nodes);
    const index = nodeIndexFileOf(file);
    const whole = readFileSync(index);

    truncateSync(index, whole.length - 10);
    await readAll(file, nodes);
    expect(readFileSync(index).equals(whole)).toBe(true);

    // The index of a CAR of another length: that of a second, smaller one.
    const other = await metadataCar('other.car', 400);
    await readAll(other.file, other.nodes.slice(0, 10));
    copyFileSync(nodeIndexFileOf(other.file), index);
    await readAll(file, nodes);
    expect(readFileSync(index).equals(whole)).toBe(true);
  });

  it('refuses a manifest damaged on the disk when it is found through the index', async () => {
    const { file, nodes } = await metadataCar('manifest.car');
    await readAll(file, nodes);
    const bytes = readFileSync(file);
    // The manifest is the CAR's last block; its last byte is the root link's.
    bytes[bytes.length - 1] = (bytes.at(-1) ?? 0) ^ 0xff;
    writeFileSync(file, bytes);
    await expect(openBrowsableTree(file)).rejects.toThrow(/damaged: its manifest/);
  });
});
