import { UnixFS } from 'ipfs-unixfs';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CID } from 'multiformats/cid';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import { LeafSizes, MetadataNodes } from '../../../main/packer/index.ts';
import { listVersionPath, restoreVersion, VersionDiffer } from '../../../main/restore/index.ts';
import { leavesInTreeOrder } from '../../../main/restore/leaves-in-tree-order.ts';
import type { ServiceClient } from '../../../main/service/index.ts';
import { putNode } from '../../helpers/dag-pb-node.ts';

// A folder node may be linked from many places, so a version's metadata of a few nodes can
// stand for more paths than any disk holds: each folder of a chain linking twice to the next
// doubles them. A hostile or broken server could hand such a tree to a restore, which would
// write until the disk is full, or to `canopy ls -R`, which would list until memory is. Both
// refuse it before they start, from the counts the manifest states (§17.3); a tree that links
// one real folder from two places (two copies of it) is restored as ever.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-tree-bomb-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const folderData = (): Uint8Array => new UnixFS({ type: 'directory' }).marshal();

/** A file whose bytes lie in its own node: no leaf to fetch. */
function fileNode(nodes: MetadataNodes, text: string): Promise<CID> {
  return putNode(nodes, {
    Data: new UnixFS({ type: 'file', data: new TextEncoder().encode(text) }).marshal(),
    Links: [],
  });
}

/** `levels` folders, each holding `a` and `b`, both the next; the last holds `bottom`. */
async function doublingChain(nodes: MetadataNodes, levels: number, bottom: CID): Promise<CID> {
  let next = bottom;
  for (let level = 0; level < levels; level++)
    next = await putNode(nodes, {
      Data: folderData(),
      Links: [
        { Name: 'a', Hash: next, Tsize: 0 },
        { Name: 'b', Hash: next, Tsize: 0 },
      ],
    });
  return next;
}

/** A folder holding one file of one byte, `file.txt`. */
async function folderOfOneFile(nodes: MetadataNodes): Promise<CID> {
  const file = await fileNode(nodes, 'x');
  return putNode(nodes, {
    Data: folderData(),
    Links: [{ Name: 'file.txt', Hash: file, Tsize: 0 }],
  });
}

function treeOf(nodes: MetadataNodes, root: CID, fileCount: number, totalBytes: number) {
  return {
    manifest: { version: 1, root, file_count: fileCount, total_bytes: totalBytes },
    leaves: new LeafSizes(),
    nodes,
  };
}

function restoreInto(target: string, tree: ReturnType<typeof treeOf>) {
  mkdirSync(target, { recursive: true });
  return restoreVersion({
    // No leaf is ever asked for: every file's bytes lie in its node.
    client: {} as ServiceClient,
    storageHost: 'http://127.0.0.1:9',
    tree,
    targetDir: target,
    overwrite: false,
  });
}

async function refusal(work: () => unknown): Promise<EngineError> {
  try {
    await work();
  } catch (error) {
    if (error instanceof EngineError) return error;
    throw error;
  }
  throw new Error('it was not refused');
}

describe('a version whose tree stands for more than its manifest states', () => {
  it('is refused when its folders name themselves files first, which the count must not take', async () => {
    // UnixFS Data giving its Type twice, raw then directory: ipfs-unixfs takes the last, so the
    // walk meets folders; a count that took the first would see one empty file, as stated.
    const nodes = new MetadataNodes();
    let root = await folderOfOneFile(nodes);
    for (let level = 0; level < 12; level++)
      root = await putNode(nodes, {
        Data: Uint8Array.of(0x08, 0x00, 0x08, 0x01),
        Links: [
          { Name: 'a', Hash: root, Tsize: 0 },
          { Name: 'b', Hash: root, Tsize: 0 },
        ],
      });
    const target = path.join(scratch, 'typed-twice');
    const error = await refusal(() => restoreInto(target, treeOf(nodes, root, 1, 0)));
    expect(error.message).toContain(`its tree holds ${2 ** 12} files`);
    expect(readdirSync(target)).toEqual([]);
  });

  it('is refused by a restore, which writes nothing', async () => {
    const nodes = new MetadataNodes();
    const root = await doublingChain(nodes, 30, await folderOfOneFile(nodes));
    const target = path.join(scratch, 'files');
    const error = await refusal(() => restoreInto(target, treeOf(nodes, root, 1, 1)));
    expect(error.code).toBe('protocol');
    expect(error.message).toBe(
      `the version's metadata is damaged or was not made by a backup: its tree holds ${2 ** 30} files, and its manifest states 1 for the whole version; nothing was restored`,
    );
    expect(readdirSync(target)).toEqual([]);
  });

  it('is refused when it stands for more than any disk holds, whatever its manifest states', async () => {
    const nodes = new MetadataNodes();
    const root = await doublingChain(nodes, 40, await folderOfOneFile(nodes));
    const target = path.join(scratch, 'stated');
    const error = await refusal(() => restoreInto(target, treeOf(nodes, root, 2 ** 40, 2 ** 40)));
    expect(error.message).toBe(
      `the version's metadata is damaged or was not made by a backup: its tree holds ${2 ** 40 + 2 ** 41 - 1} files, folders and links, more than any file system holds; nothing was restored`,
    );
    expect(readdirSync(target)).toEqual([]);
  });

  it('is refused when the files are as stated but their bytes are not', async () => {
    const nodes = new MetadataNodes();
    const root = await putNode(nodes, {
      Data: folderData(),
      Links: [{ Name: 'big.txt', Hash: await fileNode(nodes, 'four'), Tsize: 0 }],
    });
    const target = path.join(scratch, 'bytes');
    const error = await refusal(() => restoreInto(target, treeOf(nodes, root, 1, 3)));
    expect(error.message).toContain('its tree holds 4 bytes of files, and its manifest states 3');
    expect(readdirSync(target)).toEqual([]);
  });

  it('is refused when it is folders only, by a restore and by a listing of all it holds', async () => {
    const nodes = new MetadataNodes();
    const empty = await putNode(nodes, { Data: folderData(), Links: [] });
    const root = await doublingChain(nodes, 30, empty);
    const tree = treeOf(nodes, root, 0, 0);
    const target = path.join(scratch, 'folders');
    const error = await refusal(() => restoreInto(target, tree));
    expect(error.message).toContain(`its tree holds ${2 ** 31 - 1} folders and links`);
    expect(readdirSync(target)).toEqual([]);
    const listing = await refusal(() => listVersionPath(tree, 'a/b', true));
    expect(listing.message).toContain(`a/b in its tree holds ${2 ** 29 - 1} folders and links`);
    expect(listing.message).toContain('nothing was listed');
    // One folder's own entries are listed as ever: they are as many as its node names.
    expect(listVersionPath(tree, 'a/b').map((entry) => entry.name)).toEqual(['a', 'b']);
  });

  it('is restored when one folder is linked from two places, as copies of it are', async () => {
    const nodes = new MetadataNodes();
    const copy = await putNode(nodes, {
      Data: folderData(),
      Links: [
        { Name: 'one.txt', Hash: await fileNode(nodes, 'one'), Tsize: 0 },
        { Name: 'two.txt', Hash: await fileNode(nodes, 'two!'), Tsize: 0 },
      ],
    });
    const root = await putNode(nodes, {
      Data: folderData(),
      Links: [
        { Name: 'copy 1', Hash: copy, Tsize: 0 },
        { Name: 'copy 2', Hash: copy, Tsize: 0 },
      ],
    });
    const target = path.join(scratch, 'copies');
    const result = await restoreInto(target, treeOf(nodes, root, 4, 14));
    expect(result.files).toBe(4);
    for (const folder of ['copy 1', 'copy 2']) {
      expect(readFileSync(path.join(target, folder, 'one.txt'), 'utf8')).toBe('one');
      expect(readFileSync(path.join(target, folder, 'two.txt'), 'utf8')).toBe('two!');
    }
    // The manifest's counts are for the whole version: one folder of it holds fewer.
    const onePart = path.join(scratch, 'one copy');
    mkdirSync(onePart);
    const part = await restoreVersion({
      client: {} as ServiceClient,
      storageHost: 'http://127.0.0.1:9',
      tree: treeOf(nodes, root, 4, 14),
      targetDir: onePart,
      overwrite: false,
      subPath: 'copy 2',
    });
    expect(part.files).toBe(2);
    expect(readdirSync(path.join(onePart, 'copy 2')).sort()).toEqual(['one.txt', 'two.txt']);
  });

  it('is refused by a verify and by a comparison with a version before it', async () => {
    const nodes = new MetadataNodes();
    const bottom = await folderOfOneFile(nodes);
    const bomb = treeOf(nodes, await doublingChain(nodes, 30, bottom), 1, 1);
    expect((await refusal(() => [...leavesInTreeOrder(bomb)])).message).toContain(
      'nothing was verified',
    );
    // The version before held the chain's last folder alone, named `b`: all else was added.
    const before = treeOf(
      nodes,
      await putNode(nodes, { Data: folderData(), Links: [{ Name: 'b', Hash: bottom, Tsize: 0 }] }),
      1,
      1,
    );
    const comparison = await refusal(() => [...new VersionDiffer(before, bomb).changes()]);
    expect(comparison.message).toContain(`a in its tree holds ${2 ** 29} files`);
    expect(comparison.message).toContain('nothing was compared');
  });

  it('is refused by a comparison with another such tree, once they differ in more than both state', async () => {
    // Two chains alike but for the file at their bottom: each of the 2^30 paths to it changed,
    // and no part of either is added or removed whole, to be counted before it is walked.
    const nodes = new MetadataNodes();
    const before = treeOf(
      nodes,
      await doublingChain(nodes, 30, await folderOfOneFile(nodes)),
      1,
      1,
    );
    const otherBottom = await putNode(nodes, {
      Data: folderData(),
      Links: [{ Name: 'file.txt', Hash: await fileNode(nodes, 'y'), Tsize: 0 }],
    });
    const after = treeOf(nodes, await doublingChain(nodes, 30, otherBottom), 1, 1);
    const told: string[] = [];
    const comparison = await refusal(() => {
      for (const change of new VersionDiffer(before, after).changes()) told.push(change.path);
    });
    expect(comparison.code).toBe('protocol');
    expect(comparison.message).toContain(
      'the two versions differ in more files than their manifests state they hold',
    );
    expect(comparison.message).toMatch(
      new RegExp(`nothing was compared from ${'a/'.repeat(28)}b/a/file\\.txt on$`),
    );
    // The two files their manifests state, one changed in each: the third change is refused.
    expect(told).toEqual([`${'a/'.repeat(30)}file.txt`, `${'a/'.repeat(29)}b/file.txt`]);
  });
});
