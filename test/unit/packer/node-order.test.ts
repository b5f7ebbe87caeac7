import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import {
  MetadataNodes,
  packSource,
  type PackedEntry,
  type PackInput,
} from '../../../main/packer/index.ts';
import { NodeOrder } from '../../../main/packer/node-order.ts';
import { encodeCar, RAW_CODEC, sha256CidOf } from '../../../main/protocol/index.ts';
import { readTreeIndex } from '../../../main/uploader/index.ts';

// The service stores a metadata CAR's content-defined chunks once (§10), so a version that
// changed one file costs it the chunks around that file's nodes, if the CAR of the version
// before has the same bytes elsewhere: the same nodes in the same order, whether the backup
// read a folder, reused its files, or copied it whole from the version before.

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Folders of small files, one sharded (HAMT: 180-character names bring the 256 KiB threshold
 * within 1 500 files), files of several leaves, a file large enough to be packed ahead of its
 * turn, duplicates, a symlink and an empty folder.
 */
function varietyTree(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-node-order-'));
  dirs.push(dir);
  for (const folder of ['docs', 'docs/old', 'photos', 'empty', 'many'])
    mkdirSync(path.join(dir, folder), { recursive: true });
  for (let i = 0; i < 40; i++) writeFileSync(path.join(dir, 'docs', `note-${i}.txt`), `note ${i}`);
  for (let i = 0; i < 10; i++)
    writeFileSync(path.join(dir, 'docs', 'old', `copy-${i}.txt`), 'the same words');
  writeFileSync(path.join(dir, 'photos', 'a.raw'), randomBytes(2 * 1024 * 1024 + 5));
  writeFileSync(path.join(dir, 'photos', 'b.jpg'), randomBytes(300 * 1024));
  writeFileSync(path.join(dir, 'photos', 'c.txt'), 'caption');
  for (let i = 0; i < 1500; i++)
    writeFileSync(
      path.join(dir, 'many', `${String(i).padStart(4, '0')}-${'x'.repeat(175)}`),
      `${i}`,
    );
  writeFileSync(path.join(dir, 'top.txt'), 'top');
  symlinkSync('docs/note-1.txt', path.join(dir, 'link'));
  return dir;
}

/** A leaf handed on after a random few milliseconds: files finish in a different order. */
async function jitter(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
}

async function pack(dir: string, extra: Partial<PackInput> = {}) {
  const nodes = new MetadataNodes();
  const order: string[] = [];
  const entries: PackedEntry[] = [];
  const tree = await packSource({
    sourceDir: dir,
    sourceLabel: 'test:/src',
    deviceFingerprint: 'a'.repeat(40),
    createdAtSeconds: 1_800_000_000,
    onLeaf: jitter,
    onSkip: (item) => {
      throw new Error(`skipped ${item.path}`);
    },
    onEntry: (entry) => entries.push(entry),
    ...extra,
    nodes: {
      put(cid, bytes) {
        if (!nodes.has(cid)) order.push(cid.toString());
        nodes.put(cid, bytes);
      },
    },
  });
  const previous = await readTreeIndex(
    encodeCar(
      [tree.manifestCid],
      [{ cid: tree.manifestCid, bytes: tree.manifestBytes }, ...nodes.sorted()],
    ),
  );
  return { tree, order, entries, previous };
}

/** A second pack of `dir` that copies every folder but `walked` whole from `first`. */
async function packReusing(
  dir: string,
  first: Awaited<ReturnType<typeof pack>>,
  walked: ReadonlySet<string>,
) {
  const byPath = new Map(first.entries.map((entry) => [entry.path, entry]));
  return pack(dir, {
    knownLeaves: first.previous.leaves,
    previousNodes: first.previous.nodes,
    reuseFolder: (folder) => {
      const entry = byPath.get(folder.path);
      if (walked.has(folder.path) || !entry?.cid || entry.nodeSize === null) return undefined;
      return {
        cid: CID.parse(entry.cid),
        size: entry.nodeSize,
        files: 0,
        bytes: 0,
        hasEntries: true,
      };
    },
  });
}

describe('the order of a tree’s nodes', () => {
  it('is the same from one backup to the next, however the files finish', async () => {
    const dir = varietyTree();
    const first = await pack(dir);
    const again = await pack(dir);
    expect(again.tree.rootCid.equals(first.tree.rootCid)).toBe(true);
    expect(again.order).toEqual(first.order);
    // Each folder's node comes after everything under it: the root's last.
    expect(first.order.at(-1)).toBe(first.tree.rootCid.toString());
  });

  it('is the same for folders copied from the version before, plain or sharded, as for folders walked', async () => {
    const dir = varietyTree();
    const first = await pack(dir);
    const copied = await packReusing(dir, first, new Set());
    expect(copied.tree.rootCid.equals(first.tree.rootCid)).toBe(true);
    expect(copied.tree.knownLeavesDropped(10)).toEqual([]);
    expect(copied.order).toEqual(first.order);
  });

  it('differs, after one file changed, only in the nodes of that file and the folders above it', async () => {
    const dir = varietyTree();
    const first = await pack(dir);
    writeFileSync(path.join(dir, 'photos', 'c.txt'), 'another caption');
    const second = await packReusing(dir, first, new Set(['photos']));
    const changed = new Set(['photos/c.txt', 'photos', '']);
    const nodesOf = (entries: PackedEntry[]) =>
      new Set(entries.filter((entry) => changed.has(entry.path)).map((entry) => entry.cid));
    const newNodes = nodesOf(second.entries);
    const oldNodes = nodesOf(first.entries);
    expect(newNodes.size).toBe(3);
    expect([...newNodes].some((cid) => oldNodes.has(cid))).toBe(false);
    // Each in the place of the one it replaces.
    expect(second.order.length).toBe(first.order.length);
    expect(second.order.map((cid) => (newNodes.has(cid) ? 'changed' : cid))).toEqual(
      first.order.map((cid) => (oldNodes.has(cid) ? 'changed' : cid)),
    );
  });
});

describe('NodeOrder', () => {
  it('writes slots in the order they were placed, whatever order they were filled and closed in', async () => {
    const written: string[] = [];
    const order = new NodeOrder({ put: (cid) => void written.push(cid.toString()) });
    const cid = (n: number) => sha256CidOf(RAW_CODEC, Uint8Array.of(n));
    const first = order.next();
    const early = order.detached();
    await early.put(cid(3), new Uint8Array());
    early.close();
    const second = order.next();
    await second.put(cid(2), new Uint8Array());
    await first.put(cid(1), new Uint8Array());
    expect(written).toEqual([cid(1).toString()]);
    order.place(early);
    first.close();
    await second.put(cid(4), new Uint8Array());
    second.close();
    await order.finish();
    expect(written).toEqual([cid(1), cid(2), cid(4), cid(3)].map(String));
  });

  it('makes puts behind the first slot wait once too many bytes are held, until they are written', async () => {
    const written: string[] = [];
    const order = new NodeOrder({ put: (cid) => void written.push(cid.toString()) }, 1000);
    const cid = (n: number) => sha256CidOf(RAW_CODEC, Uint8Array.of(n));
    const first = order.next();
    const behind = order.next();
    // Within the bound: held, and the put is done at once.
    expect(behind.put(cid(1), new Uint8Array(100))).toBeUndefined();
    const waiting = behind.put(cid(2), new Uint8Array(2000));
    expect(waiting).toBeInstanceOf(Promise);
    let resumed = false;
    void waiting?.then(() => {
      resumed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(resumed).toBe(false);
    expect(written).toEqual([]);
    // The first slot closes: the held nodes are written, and the put goes on.
    first.close();
    await waiting;
    expect(written).toEqual([cid(1), cid(2)].map(String));
    // First in line now, it writes through, with no bound.
    expect(behind.put(cid(3), new Uint8Array(5000))).toBeUndefined();
    behind.close();

    // A slot waiting behind others goes on once it is first in line, though as much is held.
    const wide = new NodeOrder({ put: () => undefined }, 1000);
    const head = wide.next();
    const second = wide.next();
    const third = wide.next();
    const thirdWaits = third.put(cid(4), new Uint8Array(900));
    const secondWaits = second.put(cid(5), new Uint8Array(900));
    expect(thirdWaits).toBeInstanceOf(Promise);
    expect(secondWaits).toBeInstanceOf(Promise);
    head.close();
    await secondWaits;
    // The third waits on: as much is held as before, until the second is written.
    second.close();
    await thirdWaits;
    third.close();
    await wide.finish();
  });

  it('lets puts waiting for room go on once released, though the line never moves again', async () => {
    const order = new NodeOrder({ put: () => undefined }, 100);
    order.next();
    const early = order.detached();
    const waiting = early.put(sha256CidOf(RAW_CODEC, Uint8Array.of(1)), new Uint8Array(500));
    expect(waiting).toBeInstanceOf(Promise);
    order.release();
    await waiting;
    expect(
      early.put(sha256CidOf(RAW_CODEC, Uint8Array.of(2)), new Uint8Array(500)),
    ).toBeUndefined();
  });

  it('reports a slot left open, and the first held node that failed to be written', async () => {
    const open = new NodeOrder({ put: () => undefined });
    open.next();
    await expect(open.finish()).rejects.toThrow('left open');

    const failing = new NodeOrder({ put: () => Promise.reject(new Error('disk full')) });
    const head = failing.next();
    const after = failing.next();
    await after.put(sha256CidOf(RAW_CODEC, Uint8Array.of(1)), new Uint8Array());
    after.close();
    head.close();
    await expect(failing.finish()).rejects.toThrow('disk full');
  });
});
