import { afterAll, describe, expect, it } from 'vitest';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { exporter, recursive } from 'ipfs-unixfs-exporter';
import { importer, type ImportCandidate } from 'ipfs-unixfs-importer';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import {
  LeafSizes,
  MetadataNodes,
  packSource,
  type PackedEntry,
  type PackInput,
} from '../../../main/packer/index.ts';
import { encodeCar } from '../../../main/protocol/index.ts';
import type { SkippedItem } from '../../../main/scanner/index.ts';
import {
  leavesOfFile,
  listedLeavesInTree,
  readTreeIndex,
  readTreeLeaves,
} from '../../../main/uploader/index.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function pack(dir: string, extra: Partial<PackInput> = {}) {
  const blocks = new Map<string, Uint8Array>();
  const skipped: SkippedItem[] = [];
  const nodes = new MetadataNodes();
  const entries: PackedEntry[] = [];
  const tree = await packSource({
    nodes,
    onEntry: (entry) => entries.push(entry),
    ...extra,
    sourceDir: dir,
    sourceLabel: 'test:/src',
    deviceFingerprint: 'a'.repeat(40),
    createdAtSeconds: 1_800_000_000,
    onLeaf: (cid, bytes, origin, text, leaf) => {
      // Lent bytes: the packer reads the next chunk into the same buffer.
      blocks.set(cid.toString(), new Uint8Array(bytes));
      return extra.onLeaf?.(cid, bytes, origin, text, leaf) ?? Promise.resolve();
    },
    onSkip: (item) => skipped.push(item),
  });
  const metadataBlocks = [{ cid: tree.manifestCid, bytes: tree.manifestBytes }, ...nodes.sorted()];
  for (const block of metadataBlocks) blocks.set(block.cid.toString(), block.bytes);
  return { tree, entries, blocks, skipped, metadataBlocks };
}

describe('packSource', () => {
  it('packs files, folders and symlinks into a tree a standard exporter reads back byte for byte', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-'));
    dirs.push(dir);
    const big = randomBytes(1_048_576 + 1);
    mkdirSync(path.join(dir, 'docs', 'deep'), { recursive: true });
    writeFileSync(path.join(dir, 'empty.txt'), '');
    writeFileSync(path.join(dir, 'docs', 'deep', 'big.bin'), big);
    writeFileSync(path.join(dir, 'docs', 'café\nnewline.txt'), 'hello');
    symlinkSync('docs/deep/big.bin', path.join(dir, 'link'));
    // A folder whose name ends in a backslash: 'back\\/inside.txt' is two names, not one.
    mkdirSync(path.join(dir, 'back\\'));
    writeFileSync(path.join(dir, 'back\\', 'inside.txt'), 'inside');
    chmodSync(path.join(dir, 'docs', 'café\nnewline.txt'), 0o751);
    utimesSync(
      path.join(dir, 'empty.txt'),
      new Date('2001-02-03T04:05:06Z'),
      new Date('2001-02-03T04:05:06Z'),
    );

    const numbered: Array<[string, number]> = [];
    const { tree, blocks } = await pack(dir, {
      onLeaf: (_cid, _bytes, _origin, text, leaf) => {
        numbered.push([text, leaf]);
        return Promise.resolve();
      },
    });
    // Each leaf handed on is numbered as the packed tree's leaves number it.
    expect(numbered.map(([text]) => tree.leaves.indexOfText(text))).toEqual(
      numbered.map(([, leaf]) => leaf),
    );
    expect(numbered.map(([, leaf]) => leaf).sort()).toEqual([0, 1, 2, 3, 4]);
    expect(tree.fileCount).toBe(4);
    expect(tree.totalBytes).toBe(big.length + 5 + 6);
    // The empty file is a File node over one empty raw leaf, as the standard importer makes it.
    expect(Array.from(tree.leaves, (leaf) => leaf.size).sort((a, b) => a - b)).toEqual([
      0, 1, 5, 6, 1_048_576,
    ]);
    const rootLinks = dagPb.decode(blocks.get(tree.rootCid.toString()) ?? new Uint8Array()).Links;
    expect(rootLinks.map((link) => link.Name)).toEqual(['back\\', 'docs', 'empty.txt', 'link']);
    const store = {
      // eslint-disable-next-line @typescript-eslint/require-await -- the exporter's contract is async
      async *get(cid: CID) {
        const bytes = blocks.get(cid.toString());
        if (!bytes) throw new Error(`missing ${cid.toString()}`);
        yield bytes;
      },
    };
    const found = new Map<
      string,
      { type: string; content?: Buffer; mode?: number | undefined; mtime?: number; target?: string }
    >();
    for await (const ref of recursive(tree.rootCid, store)) {
      const entry = await exporter(ref.cid, store);
      const rel = ref.path.split('/').slice(1).join('/');
      if (entry.type === 'file' && entry.unixfs.type === 'symlink') {
        // This exporter reports a symlink as a file whose UnixFS data is the target.
        found.set(rel, { type: 'symlink', target: new TextDecoder().decode(entry.unixfs.data) });
      } else if (entry.type === 'file') {
        const chunks: Uint8Array[] = [];
        for await (const chunk of entry.content()) chunks.push(chunk);
        found.set(rel, {
          type: 'file',
          content: Buffer.concat(chunks),
          mode: entry.unixfs.mode,
          mtime: Number(entry.unixfs.mtime?.secs),
        });
      } else if (entry.type === 'directory') {
        found.set(rel, { type: 'directory' });
      } else {
        found.set(rel, { type: entry.type });
      }
    }
    expect(found.get('docs/deep/big.bin')?.content?.equals(big)).toBe(true);
    expect(found.get('docs/café\nnewline.txt')).toMatchObject({ mode: 0o751 });
    expect(found.get('empty.txt')).toMatchObject({
      content: Buffer.alloc(0),
      mtime: Date.parse('2001-02-03T04:05:06Z') / 1000,
    });
    expect(found.get('link')).toEqual({ type: 'symlink', target: 'docs/deep/big.bin' });
    expect(found.get('back\\')).toEqual({ type: 'directory' });
    expect(found.get('back\\/inside.txt')?.content?.toString()).toBe('inside');
  });

  it('gives identical root and manifest CIDs for identical content', async () => {
    const a = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-'));
    const b = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-'));
    dirs.push(a, b);
    for (const dir of [a, b]) {
      writeFileSync(path.join(dir, 'same.txt'), 'same bytes');
      utimesSync(path.join(dir, 'same.txt'), 1_000_000_000, 1_000_000_000);
      utimesSync(dir, 1_000_000_000, 1_000_000_000);
    }
    const first = await pack(a);
    const second = await pack(b);
    expect(first.tree.rootCid.toString()).toBe(second.tree.rootCid.toString());
    expect(first.tree.manifestCid.toString()).toBe(second.tree.manifestCid.toString());
  });
});

/** A folder with the sizes around the chunk and link limits that matter to CIDs. */
function sampleTree(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-'));
  dirs.push(dir);
  mkdirSync(path.join(dir, 'nested', 'deeper'), { recursive: true });
  writeFileSync(path.join(dir, 'empty'), '');
  writeFileSync(path.join(dir, 'exactly-1MiB'), randomBytes(1_048_576));
  writeFileSync(path.join(dir, 'nested', '1MiB-plus-1'), randomBytes(1_048_577));
  writeFileSync(path.join(dir, 'nested', 'deeper', '3MiB-plus-7'), randomBytes(3 * 1_048_576 + 7));
  writeFileSync(path.join(dir, 'nested', 'tiny.txt'), 'tiny');
  chmodSync(path.join(dir, 'nested', 'tiny.txt'), 0o640);
  symlinkSync('nested/tiny.txt', path.join(dir, 'link'));
  for (const rel of ['empty', 'nested/tiny.txt', 'nested', ''])
    utimesSync(
      path.join(dir, rel),
      new Date('2010-05-06T07:08:09Z'),
      new Date('2010-05-06T07:08:09Z'),
    );
  return dir;
}

/** The same folder as stock importer candidates, read whole into memory. */
function stockCandidates(dir: string): ImportCandidate[] {
  const out: ImportCandidate[] = [];
  const meta = (full: string) => {
    const stats = lstatSync(full, { bigint: true });
    return {
      mode: Number(stats.mode & 0o7777n),
      mtime: {
        secs: stats.mtimeNs / 1_000_000_000n,
        nsecs: Number(stats.mtimeNs % 1_000_000_000n),
      },
    };
  };
  const walk = (rel: string): void => {
    const names = readdirSync(path.join(dir, rel)).sort();
    for (const name of names) {
      const child = rel === '' ? name : `${rel}/${name}`;
      const full = path.join(dir, child);
      const stats = lstatSync(full);
      if (stats.isSymbolicLink())
        out.push({ path: `root/${child}`, link: readlinkSync(full), ...meta(full) });
      else if (stats.isDirectory()) {
        out.push({ path: `root/${child}`, ...meta(full) });
        walk(child);
      } else out.push({ path: `root/${child}`, content: readFileSync(full), ...meta(full) });
    }
  };
  out.push({ path: 'root', ...meta(dir) });
  walk('');
  return out;
}

describe('CIDs', () => {
  it("equal the stock importer's with the unixfs-v1-2025 profile and no single-leaf reduction", async () => {
    const dir = sampleTree();
    const ours = await pack(dir);
    const discard = { put: (cid: CID) => Promise.resolve(cid) };
    let stockRoot: CID | undefined;
    for await (const entry of importer(stockCandidates(dir), discard, {
      profile: 'unixfs-v1-2025',
      reduceSingleLeafToSelf: false,
    })) {
      if (entry.path === 'root') stockRoot = entry.cid;
    }
    expect(stockRoot?.toString()).toBe(ours.tree.rootCid.toString());
  });

  it('of a 1 MiB + 1 byte file are the File node built by hand from §17.1', async () => {
    const dir = sampleTree();
    const { entries } = await pack(dir);
    const bytes = readFileSync(path.join(dir, 'nested', '1MiB-plus-1'));
    const stats = lstatSync(path.join(dir, 'nested', '1MiB-plus-1'), { bigint: true });
    const leaf = async (part: Uint8Array) => CID.createV1(raw.code, await sha256.digest(part));
    const unixfs = new UnixFS({
      type: 'file',
      mode: Number(stats.mode & 0o7777n),
      mtime: {
        secs: stats.mtimeNs / 1_000_000_000n,
        nsecs: Number(stats.mtimeNs % 1_000_000_000n),
      },
    });
    unixfs.addBlockSize(1_048_576n);
    unixfs.addBlockSize(1n);
    const node = dagPb.encode(
      dagPb.prepare({
        Data: unixfs.marshal(),
        Links: [
          { Name: '', Tsize: 1_048_576, Hash: await leaf(bytes.subarray(0, 1_048_576)) },
          { Name: '', Tsize: 1, Hash: await leaf(bytes.subarray(1_048_576)) },
        ],
      }),
    );
    const expected = CID.createV1(dagPb.code, await sha256.digest(node));
    expect(entries.find((entry) => entry.path === 'nested/1MiB-plus-1')?.cid).toBe(
      expected.toString(),
    );
  });
});

describe('a failure while packing', () => {
  it('stops the walk at once and is the error the pack ends with', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-fail-'));
    dirs.push(dir);
    for (let index = 0; index < 300; index += 1)
      writeFileSync(path.join(dir, `f${String(index).padStart(3, '0')}.txt`), `file ${index}`);
    let leaves = 0;
    let filesRead = 0;
    const packing = packSource({
      nodes: new MetadataNodes(),
      sourceDir: dir,
      sourceLabel: 'test:/src',
      deviceFingerprint: 'a'.repeat(40),
      createdAtSeconds: 1_800_000_000,
      onSkip: () => undefined,
      // A staging disk that fills up at the third leaf.
      onLeaf: () => {
        leaves += 1;
        return leaves === 3 ? Promise.reject(new Error('disk full')) : Promise.resolve();
      },
      onBytesRead: () => {
        filesRead += 1;
      },
    });
    await expect(packing).rejects.toThrow('disk full');
    // A few files were read ahead of the failure, not the rest of the tree.
    expect(filesRead).toBeLessThan(20);
  });
});

describe('an unchanged file', () => {
  it('is not read again: its known leaves give the same CIDs', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const previous = await readTreeIndex(encodeCar([first.tree.manifestCid], first.metadataBlocks));
    const cidOf = new Map(first.entries.map((entry) => [entry.path, entry.cid ?? '']));
    const leavesSeen: string[] = [];
    const second = await pack(dir, {
      reuse: (file) => leavesOfFile(previous, cidOf.get(file.path) ?? '', file.size),
      onLeaf: (cid) => {
        leavesSeen.push(cid.toString());
        return Promise.resolve();
      },
    });
    expect(second.tree.rootCid.toString()).toBe(first.tree.rootCid.toString());
    expect(second.tree).toMatchObject({ bytesRead: 0, filesReused: 5, fileCount: 5 });
    expect(leavesSeen).toEqual([]);
    expect(first.tree.bytesRead).toBe(first.tree.totalBytes);
  });

  it('with a new mode keeps its leaves but gets the File node a fresh read gives', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const previous = await readTreeIndex(encodeCar([first.tree.manifestCid], first.metadataBlocks));
    const cidOf = new Map(first.entries.map((entry) => [entry.path, entry.cid ?? '']));
    chmodSync(path.join(dir, 'nested', 'deeper', '3MiB-plus-7'), 0o600);
    const reused = await pack(dir, {
      reuse: (file) => leavesOfFile(previous, cidOf.get(file.path) ?? '', file.size),
    });
    const fresh = await pack(dir);
    expect(reused.tree.bytesRead).toBe(0);
    expect(reused.tree.rootCid.toString()).toBe(fresh.tree.rootCid.toString());
    expect(reused.tree.rootCid.toString()).not.toBe(first.tree.rootCid.toString());
  });

  it('is not read again from the leaves its entry lists, with no File node of the previous tree', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const car = encodeCar([first.tree.manifestCid], first.metadataBlocks);
    const previous = await readTreeLeaves(car);
    expect(previous.nodes).toBeUndefined();
    const listOf = new Map(first.entries.map((entry) => [entry.path, entry.leaves]));
    // Every file's list is its File node's leaves; folders and links have none.
    const whole = await readTreeIndex(car);
    for (const entry of first.entries) {
      if (entry.kind !== 'file') expect(entry.leaves).toBeNull();
      else
        expect(listedLeavesInTree(previous, entry.leaves ?? new Uint8Array(), entry.size)).toEqual(
          leavesOfFile(whole, entry.cid ?? '', entry.size),
        );
    }
    const second = await pack(dir, {
      reuse: (file) =>
        listedLeavesInTree(previous, listOf.get(file.path) ?? new Uint8Array(), file.size),
      onLeaf: () => Promise.reject(new Error('a leaf was made again')),
    });
    expect(second.tree.rootCid.toString()).toBe(first.tree.rootCid.toString());
    expect(second.tree).toMatchObject({ bytesRead: 0, filesReused: 5, fileCount: 5 });
  });

  it('with the previous leaves known, hands on only new leaves and names those no longer held', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const previous = await readTreeLeaves(
      encodeCar([first.tree.manifestCid], first.metadataBlocks),
    );
    const listOf = new Map(first.entries.map((entry) => [entry.path, entry.leaves]));
    const removed = readFileSync(path.join(dir, 'exactly-1MiB'));
    rmSync(path.join(dir, 'exactly-1MiB'));
    const added = randomBytes(2000);
    writeFileSync(path.join(dir, 'added'), added);
    const handedOn: string[] = [];
    const second = await pack(dir, {
      knownLeaves: previous.leaves,
      reuse: (file) => {
        const list = listOf.get(file.path);
        return list ? listedLeavesInTree(previous, list, file.size) : undefined;
      },
      onLeaf: (cid) => {
        handedOn.push(cid.toString());
        return Promise.resolve();
      },
    });
    const leafOf = async (bytes: Uint8Array) =>
      CID.createV1(raw.code, await sha256.digest(bytes)).toString();
    expect(handedOn).toEqual([await leafOf(added)]);
    // The tree records only its new leaves: the added file's, and the empty leaf, which no node
    // links (an empty file's node has no links) and so no known tree holds.
    expect(Array.from(second.tree.leaves, (leaf) => leaf.cid.toString())).toEqual([
      ...handedOn,
      await leafOf(new Uint8Array()),
    ]);
    expect(second.tree.knownLeavesDropped(10).map(String)).toEqual([await leafOf(removed)]);
    expect(second.tree.rootCid.toString()).toBe((await pack(dir)).tree.rootCid.toString());
  });

  it('is read after all when its listed leaves do not fit its size or the previous tree lacks one', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const previous = await readTreeLeaves(
      encodeCar([first.tree.manifestCid], first.metadataBlocks),
    );
    const big = first.entries.find((entry) => entry.path === 'nested/deeper/3MiB-plus-7');
    const list = big?.leaves ?? new Uint8Array();
    expect(listedLeavesInTree(previous, list, 3 * 1_048_576 + 7)).toHaveLength(4);
    // A size that needs another leaf, or one fewer, or the same count with a last leaf of
    // another size.
    expect(listedLeavesInTree(previous, list, 4 * 1_048_576 + 1)).toBeUndefined();
    expect(listedLeavesInTree(previous, list, 3 * 1_048_576)).toBeUndefined();
    expect(listedLeavesInTree(previous, list, 3 * 1_048_576 + 8)).toBeUndefined();
    // A leaf the version does not hold: nothing to build on.
    const foreign = Uint8Array.from(list);
    foreign[0] = (foreign[0] ?? 0) ^ 0xff;
    expect(listedLeavesInTree(previous, foreign, 3 * 1_048_576 + 7)).toBeUndefined();
    // The empty file lists none, and needs none.
    const empty = first.entries.find((entry) => entry.path === 'empty');
    expect(empty?.leaves).toHaveLength(0);
    expect(listedLeavesInTree(previous, empty?.leaves ?? new Uint8Array(1), 0)).toEqual([]);
  });

  it('is read after all when the previous tree lacks its node or its size disagrees', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const previous = await readTreeIndex(encodeCar([first.tree.manifestCid], first.metadataBlocks));
    const big = first.entries.find((entry) => entry.path === 'nested/deeper/3MiB-plus-7');
    expect(big).toBeDefined();
    expect(leavesOfFile(previous, big?.cid ?? '', 3 * 1_048_576 + 7)).toHaveLength(4);
    expect(leavesOfFile(previous, big?.cid ?? '', 3 * 1_048_576 + 8)).toBeUndefined();
    expect(leavesOfFile(previous, first.tree.rootCid.toString(), 0)).toBeUndefined();
    const absent = CID.createV1(dagPb.code, await sha256.digest(new Uint8Array([1]))).toString();
    expect(leavesOfFile(previous, absent, 0)).toBeUndefined();
  });
});

describe('an unchanged folder', () => {
  it('is not walked: its nodes come from the previous tree, and its leaves stay held', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const previous = await readTreeIndex(encodeCar([first.tree.manifestCid], first.metadataBlocks));
    const nested = first.entries.find((entry) => entry.path === 'nested');
    if (!nested?.cid || nested.nodeSize === null) throw new Error('no node for the folder');
    // What is under `nested` changes on disk, unseen: the caller vouches for the folder.
    const before = readFileSync(path.join(dir, 'nested', 'deeper', '3MiB-plus-7'));
    writeFileSync(path.join(dir, 'nested', 'deeper', '3MiB-plus-7'), randomBytes(before.length));
    writeFileSync(path.join(dir, 'nested', 'unseen.txt'), 'unseen');
    const added = Buffer.from('added at the top');
    writeFileSync(path.join(dir, 'top.txt'), added);
    const listOf = new Map(first.entries.map((entry) => [entry.path, entry.leaves]));
    const asked: string[] = [];
    const reused: Array<[string, number]> = [];
    const handedOn: string[] = [];
    const second = await pack(dir, {
      knownLeaves: previous.leaves,
      previousNodes: previous.nodes,
      reuse: (file) => {
        const list = listOf.get(file.path);
        return list ? listedLeavesInTree(previous, list, file.size) : undefined;
      },
      reuseFolder: (folder) => {
        asked.push(folder.path);
        if (folder.path !== 'nested') return undefined;
        return {
          cid: CID.parse(nested.cid ?? ''),
          size: nested.nodeSize ?? 0,
          files: 3,
          bytes: 1_048_577 + 4 + 3 * 1_048_576 + 7,
          hasEntries: true,
        };
      },
      onFolderReused: (folder, files) => reused.push([folder.path, files]),
      onLeaf: (cid) => {
        handedOn.push(cid.toString());
        return Promise.resolve();
      },
    });
    // Asked about the one folder the walk found; nothing under it was walked or read.
    expect(asked).toEqual(['nested']);
    expect(reused).toEqual([['nested', 3]]);
    expect(second.entries.filter((entry) => entry.path.startsWith('nested/'))).toEqual([]);
    expect(second.entries.find((entry) => entry.path === 'nested')).toMatchObject({
      cid: nested.cid,
      nodeSize: nested.nodeSize,
    });
    expect(second.tree).toMatchObject({ fileCount: 6, bytesRead: added.length, filesReused: 5 });
    expect(second.tree.totalBytes).toBe(first.tree.totalBytes + added.length);
    // Every leaf of the previous tree is still held: none is named dropped.
    expect(second.tree.knownLeavesDropped(10)).toEqual([]);
    expect(handedOn).toEqual([CID.createV1(raw.code, await sha256.digest(added)).toString()]);
    // The new metadata holds every node under the folder: a standard exporter reads the old
    // content back from it and the blocks stored before.
    const blocks = new Map([...first.blocks, ...second.blocks]);
    const store = {
      // eslint-disable-next-line @typescript-eslint/require-await -- the exporter's contract is async
      async *get(cid: CID) {
        const bytes = blocks.get(cid.toString());
        if (!bytes) throw new Error(`missing ${cid.toString()}`);
        yield bytes;
      },
    };
    const metadata = new Set(second.metadataBlocks.map((block) => block.cid.toString()));
    for await (const ref of recursive(second.tree.rootCid, store)) {
      if (ref.cid.code === dagPb.code) expect(metadata.has(ref.cid.toString())).toBe(true);
      if (ref.path.endsWith('/nested/deeper/3MiB-plus-7')) {
        const entry = await exporter(ref.cid, store);
        if (entry.type !== 'file') throw new Error('not a file');
        const chunks: Uint8Array[] = [];
        for await (const chunk of entry.content()) chunks.push(chunk);
        expect(Buffer.concat(chunks).equals(before)).toBe(true);
      }
    }
    expect([...metadata].length).toBe(first.metadataBlocks.length + 1);
  });

  it('fails clearly, as damaged metadata, when the previous tree lacks a node or a leaf under it', async () => {
    const dir = sampleTree();
    const first = await pack(dir);
    const previous = await readTreeIndex(encodeCar([first.tree.manifestCid], first.metadataBlocks));
    const nested = first.entries.find((entry) => entry.path === 'nested');
    const deeper = first.entries.find((entry) => entry.path === 'nested/deeper');
    if (!nested?.cid || !deeper?.cid) throw new Error('no node for the folders');
    const reuseNested = () => ({
      cid: CID.parse(nested.cid ?? ''),
      size: nested.nodeSize ?? 0,
      files: 3,
      bytes: 0,
      hasEntries: true,
    });
    const folder = (path: string) => (path === 'nested' ? reuseNested() : undefined);
    // A node under the reused folder missing from the previous metadata.
    const lacking = {
      has: (cid: CID) => previous.nodes.has(cid),
      get: (cid: CID) => (cid.toString() === deeper.cid ? undefined : previous.nodes.get(cid)),
    };
    await expect(
      pack(dir, {
        knownLeaves: previous.leaves,
        previousNodes: lacking,
        reuseFolder: (found) => folder(found.path),
      }),
    ).rejects.toMatchObject({
      code: 'protocol',
      message: `the previous version's metadata lacks node ${deeper.cid}`,
    });
    // A leaf under it that the previous version does not hold: the last 7 bytes of
    // nested/deeper/3MiB-plus-7, the only leaf of that size.
    const fewerLeaves = new LeafSizes();
    for (const leaf of previous.leaves) if (leaf.size !== 7) fewerLeaves.add(leaf.cid, leaf.size);
    await expect(
      pack(dir, {
        knownLeaves: fewerLeaves,
        previousNodes: previous.nodes,
        reuseFolder: (found) => folder(found.path),
      }),
    ).rejects.toMatchObject({ code: 'protocol', message: /links to a block it does not hold/ });
  });
});
