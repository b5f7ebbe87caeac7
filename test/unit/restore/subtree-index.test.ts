import { randomBytes } from 'node:crypto';
import { fixedSize } from 'ipfs-unixfs-importer/chunker';
import { balanced } from 'ipfs-unixfs-importer/layout';
import type { CID } from 'multiformats/cid';
import { describe, expect, it } from 'vitest';
import { rawCidOf } from '../../../main/protocol/index.ts';
import { subtreeIndex } from '../../../main/restore/subtree-index.ts';
import { importedTree } from '../../helpers/imported-tree.ts';

// The tree a restore of one file or folder reads: the leaves of that entry's files, with their
// sizes, and none of the rest of the version.

const CHUNK = 64;

/**
 * Each distinct chunk of `contents`, by its leaf's CID text, with its size. An empty file's
 * File node links to no leaf.
 */
async function chunksOf(contents: readonly Buffer[]): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  for (const content of contents)
    for (let at = 0; at < content.length; at += CHUNK) {
      const chunk = content.subarray(at, at + CHUNK);
      found.set((await rawCidOf(chunk)).toString(), chunk.length);
    }
  return found;
}

describe('subtreeIndex', () => {
  it("lists the leaves of the files at a path, files several levels deep included, and no other's", async () => {
    const contents = new Map<string, Buffer>([
      ['root/wanted/small.txt', randomBytes(10)],
      ['root/wanted/empty.txt', Buffer.alloc(0)],
      ['root/wanted/deep/large.bin', randomBytes(40 * CHUNK + 7)],
      ['root/other/large.bin', randomBytes(20 * CHUNK)],
      ['root/top.txt', randomBytes(100)],
    ]);
    // Small chunks, three links per node: the large files are DAGs several levels deep.
    const { root, nodes } = await importedTree(
      [
        { path: 'root' },
        ...[...contents].map(([path, content]) => ({ path, content })),
        { path: 'root/wanted/link', link: '../top.txt' },
      ],
      { chunker: fixedSize({ chunkSize: CHUNK }), layout: balanced({ maxChildrenPerNode: 3 }) },
    );
    let closed = 0;
    const tree = {
      manifest: { version: 1, root },
      nodes,
      close: () => {
        closed += 1;
      },
    };
    const listed = (subPath: string): Map<string, number> => {
      const index = subtreeIndex(tree, subPath);
      return new Map([...index.leaves].map(({ cid, size }) => [cid.toString(), size]));
    };
    const under = (prefix: string): Buffer[] =>
      [...contents].filter(([path]) => path.startsWith(prefix)).map(([, content]) => content);

    expect(listed('wanted/')).toEqual(await chunksOf(under('root/wanted/')));
    expect(listed('/wanted//deep/large.bin')).toEqual(await chunksOf(under('root/wanted/deep/')));
    expect(listed('wanted/deep/large.bin').size).toBe(41);
    expect(listed('')).toEqual(await chunksOf(under('root/')));
    expect(listed('nowhere')).toEqual(new Map());
    // Closed by whoever restores, not here.
    expect(closed).toBe(0);
    const index = subtreeIndex(tree, 'wanted');
    index.close();
    expect(closed).toBe(1);
  });

  it('closes the tree when the path leads through a node the metadata lacks', async () => {
    const { root, nodes } = await importedTree(
      [{ path: 'root' }, { path: 'root/a/b.txt', content: Buffer.from('b') }],
      {},
    );
    let closed = 0;
    const missing = { get: (cid: CID) => (cid.equals(root) ? nodes.get(cid) : undefined) };
    const tree = {
      manifest: { version: 1, root },
      nodes: { ...missing, has: () => false, getByText: () => undefined },
      close: () => {
        closed += 1;
      },
    };
    expect(() => subtreeIndex(tree, 'a')).toThrow(/lacks node/);
    expect(closed).toBe(1);
  });
});
