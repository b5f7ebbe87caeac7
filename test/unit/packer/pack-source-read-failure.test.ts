import { afterAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readlinkSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import {
  LeafSizes,
  MetadataNodes,
  packSource,
  type PackInput,
} from '../../../main/packer/index.ts';
import type * as LargeFileChunks from '../../../main/packer/large-file-chunks.ts';
import type { SkippedItem } from '../../../main/scanner/index.ts';
import { encodeCar } from '../../../main/protocol/index.ts';
import { readTreeLeaves } from '../../../main/uploader/index.ts';

// A file whose read fails part way (a damaged sector) is left out of the tree, and so are the
// leaves it had handed on already: no file of the tree holds them. The failure is injected
// where the packer reads large files: the real reads of a file named damaged.bin fail with EIO
// from its fourth chunk on, as strace's fault injection does in the scenario tests. A sparse
// file named damaged-huge.bin gives 1025 chunks of zeros, not read, then fails: past the
// 1024 leaves a File node's layout gathers under one node.

const MIB = 1 << 20;

vi.mock('../../../main/packer/large-file-chunks.ts', async (importOriginal) => {
  const actual = await importOriginal<typeof LargeFileChunks>();
  async function* failingOnDamaged(
    ...args: Parameters<typeof actual.largeFileChunks>
  ): ReturnType<typeof actual.largeFileChunks> {
    if (readlinkSync(`/proc/self/fd/${args[0]}`).endsWith('damaged-huge.bin')) {
      const zeros = new Uint8Array(MIB);
      const digest = await sha256.encode(zeros);
      for (let chunk = 0; chunk < 1025; chunk++) yield { bytes: zeros, digest };
      const eio = Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' });
      throw new actual.ChunkReadError(eio);
    }
    const damaged = readlinkSync(`/proc/self/fd/${args[0]}`).endsWith('damaged.bin');
    let chunks = 0;
    for await (const chunk of actual.largeFileChunks(...args)) {
      if (damaged && chunks === 3) {
        const eio = Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' });
        throw new actual.ChunkReadError(eio);
      }
      chunks += 1;
      yield chunk;
    }
  }
  return { ...actual, largeFileChunks: failingOnDamaged };
});

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A fresh source folder. */
function sourceDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-read-failure-'));
  dirs.push(dir);
  return dir;
}

/** Packs `dir`, its leaves handed to `onLeaf`; with the tree, its nodes and what was skipped. */
async function pack(dir: string, extra: Partial<Pick<PackInput, 'knownLeaves' | 'onLeaf'>> = {}) {
  const nodes = new MetadataNodes();
  const skipped: SkippedItem[] = [];
  const tree = await packSource({
    nodes,
    sourceDir: dir,
    sourceLabel: 'test:/src',
    deviceFingerprint: 'a'.repeat(40),
    createdAtSeconds: 1_800_000_000,
    onLeaf: () => Promise.resolve(),
    ...extra,
    onSkip: (item) => skipped.push(item),
  });
  return { tree, nodes, skipped };
}

async function leafOf(bytes: Uint8Array): Promise<string> {
  return CID.createV1(raw.code, await sha256.digest(bytes)).toString();
}

describe('a file whose read fails part way', () => {
  it("is left out, its leaves no other file holds are strays, and its known leaves' marks are taken back", async () => {
    const dir = sourceDir();
    const [known, onlyHere, shared, neverRead] = [0, 1, 2, 3].map(() => randomBytes(MIB));
    if (!known || !onlyHere || !shared || !neverRead) throw new Error('no chunks');
    // The version built on holds `known` (old.bin, gone since).
    const previous = new LeafSizes();
    const knownCid = CID.parse(await leafOf(known));
    previous.add(knownCid, MIB);
    writeFileSync(
      path.join(dir, 'damaged.bin'),
      Buffer.concat([known, onlyHere, shared, neverRead]),
    );
    // Another file holds one of the damaged file's leaves: that one stays the tree's.
    const tail = randomBytes(1000);
    writeFileSync(path.join(dir, 'shares.bin'), Buffer.concat([shared, tail]));
    writeFileSync(path.join(dir, 'small.txt'), 'fine');

    const handedOn: string[] = [];
    const { tree, skipped } = await pack(dir, {
      knownLeaves: previous,
      onLeaf: (cid: CID) => {
        handedOn.push(cid.toString());
        return Promise.resolve();
      },
    });

    expect(skipped).toEqual([
      {
        path: 'damaged.bin',
        kind: 'unreadable',
        reason: 'the disk could not read it (an I/O error: the disk may be failing)',
      },
    ]);
    expect(tree.fileCount).toBe(2);
    expect(tree.totalBytes).toBe(MIB + 1000 + 4);
    // What it read was handed on as it was read, the known leaf excepted; the fourth chunk
    // never was.
    expect(handedOn).toEqual(
      expect.arrayContaining([await leafOf(onlyHere), await leafOf(shared)]),
    );
    expect(handedOn).not.toContain(await leafOf(neverRead));
    expect(handedOn).not.toContain(knownCid.toString());
    expect(tree.strayLeaves.map((leaf) => tree.leaves.cidAt(leaf).toString())).toEqual([
      await leafOf(onlyHere),
    ]);
    // Held by nothing in the tree, the known leaf is no longer the version's.
    expect(tree.knownLeavesDropped(10).map(String)).toEqual([knownCid.toString()]);
  });

  it('past 1 GiB, leaves none of its nodes in the tree: a later backup counts the leaves of every node stored', async () => {
    const dir = sourceDir();
    const huge = path.join(dir, 'damaged-huge.bin');
    writeFileSync(huge, '');
    truncateSync(huge, 2 * 1024 * MIB);
    writeFileSync(path.join(dir, 'small.txt'), 'fine');
    const { tree, nodes, skipped } = await pack(dir);
    expect(skipped.map((item) => item.path)).toEqual(['damaged-huge.bin']);
    const zeroLeaf = await leafOf(new Uint8Array(MIB));
    expect(tree.strayLeaves.map((leaf) => tree.leaves.cidAt(leaf).toString())).toEqual([zeroLeaf]);
    const stored = await readTreeLeaves(
      encodeCar(
        [tree.manifestCid],
        [{ cid: tree.manifestCid, bytes: tree.manifestBytes }, ...nodes.sorted()],
      ),
    );
    expect([...stored.leaves].map((leaf) => leaf.cid.toString())).toEqual([
      await leafOf(Buffer.from('fine')),
    ]);
  });

  it('leaves no strays when every leaf it read is held by a file of the tree', async () => {
    const dir = sourceDir();
    const chunks = [0, 1, 2, 3].map(() => randomBytes(MIB));
    const whole = Buffer.concat(chunks);
    writeFileSync(path.join(dir, 'damaged.bin'), whole);
    writeFileSync(path.join(dir, 'copy.bin'), whole);
    const { tree, skipped } = await pack(dir);
    expect(skipped.map((item) => item.path)).toEqual(['damaged.bin']);
    expect(tree.strayLeaves).toEqual([]);
    expect(tree.leaves.count).toBe(4);
  });
});
