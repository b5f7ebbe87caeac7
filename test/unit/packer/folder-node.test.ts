import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { importer, type ImportCandidate } from 'ipfs-unixfs-importer';
import { describe, expect, it } from 'vitest';
import {
  emptyFolderSize,
  makeFolderNode,
  type FolderEntry,
  type MadeNode,
} from '../../../main/packer/folder-node.ts';
import { unixfsImporterOptions } from '../../../main/packer/index.ts';
import { cidText } from '../../../main/protocol/index.ts';
import { memoryBlockstore } from '../../helpers/memory-blockstore.ts';

// A folder's node made entry by entry must be the stock importer's, and above all it must shard
// exactly when the importer shards. Names of 240 characters bring the 256 KiB threshold within
// about 900 entries.

const META = { mode: 0o750, mtime: { secs: 1_600_000_000n, nsecs: 7 } };
const LONG = 'x'.repeat(240);
const fileName = (index: number) => `${LONG}-${String(index).padStart(5, '0')}`;

interface Layout {
  readonly files: number;
  /** A subfolder named to sort right after file `after`, with one entry or none. */
  readonly subfolder?: {
    readonly after: number;
    readonly hasEntries: boolean;
    /** Its name, when it is not named after file `after`: it must sort after that file. */
    readonly name?: string;
  };
}

function subfolderName(layout: Layout): string {
  return layout.subfolder?.name ?? `${fileName(layout.subfolder?.after ?? 0)}-sub`;
}

/** Large enough that a subfolder holding it needs two bytes for its Tsize, not one. */
const INNER = Buffer.alloc(300, 'i');

/** The folder as stock candidates, in the walk's order (names by their bytes). */
function candidatesOf(layout: Layout): ImportCandidate[] {
  const out: ImportCandidate[] = [{ path: 'root', ...META }];
  for (let index = 0; index < layout.files; index++) {
    out.push({ path: `root/${fileName(index)}`, content: Buffer.from(`file ${index}`), ...META });
    if (layout.subfolder?.after === index) {
      out.push({ path: `root/${subfolderName(layout)}`, ...META });
      if (layout.subfolder.hasEntries)
        out.push({ path: `root/${subfolderName(layout)}/inner`, content: INNER });
    }
  }
  return out;
}

async function stockImport(layout: Layout) {
  const store = memoryBlockstore();
  const results = new Map<string, MadeNode>();
  for await (const result of importer(candidatesOf(layout), store, unixfsImporterOptions()))
    results.set(result.path ?? '', { cid: result.cid, size: Number(result.size) });
  const root = results.get('root');
  if (!root) throw new Error('no root');
  const node = dagPb.decode(store.blocks.get(cidText(root.cid)) ?? new Uint8Array());
  const type = node.Data ? UnixFS.unmarshal(node.Data).type : undefined;
  return { root, results, sharded: type === 'hamt-sharded-directory' };
}

/** Our node of the same folder, from the stock import's entries. */
async function ourFolder(layout: Layout, stock: Map<string, MadeNode>): Promise<MadeNode> {
  const entries: FolderEntry[] = [];
  const store = memoryBlockstore();
  for (const candidate of candidatesOf(layout).slice(1)) {
    const name = candidate.path?.split('/')[1] ?? '';
    if (candidate.path?.split('/').length !== 2) continue;
    const made = stock.get(candidate.path);
    if (name === subfolderName(layout) && layout.subfolder) {
      // The importer reports no folder inside a sharded one: made here from what it reports.
      const inner = stock.get(`${candidate.path}/inner`);
      const node =
        made ?? (await makeFolderNode(META, inner ? [{ name: 'inner', node: inner }] : [], store));
      const folder = { emptySize: emptyFolderSize(META), hasEntries: layout.subfolder.hasEntries };
      entries.push({ name, node, folder });
    } else if (made) entries.push({ name, node: made });
  }
  return makeFolderNode(META, entries, store);
}

let fewestSharded: Promise<number> | undefined;

/**
 * The fewest files with which the importer shards the folder, found by halving, once for both
 * tests: each stock import of some 900 files takes a tenth of a second or more.
 */
function fewestFilesSharded(): Promise<number> {
  fewestSharded ??= (async () => {
    let flat = 500;
    let sharded = 1500;
    expect((await stockImport({ files: flat })).sharded).toBe(false);
    expect((await stockImport({ files: sharded })).sharded).toBe(true);
    while (sharded - flat > 1) {
      const middle = Math.floor((flat + sharded) / 2);
      if ((await stockImport({ files: middle })).sharded) sharded = middle;
      else flat = middle;
    }
    return sharded;
  })();
  return fewestSharded;
}

describe('makeFolderNode', () => {
  it("makes the stock importer's node, flat or sharded, on either side of the shard threshold", async () => {
    const sharded = await fewestFilesSharded();
    const layouts: Layout[] = [];
    for (const files of [sharded - 2, sharded - 1, sharded]) {
      layouts.push({ files });
      for (const after of [Math.floor(files / 2), files - 1])
        for (const hasEntries of [false, true])
          layouts.push({ files, subfolder: { after, hasEntries } });
    }
    const shardedSeen = new Set<boolean>();
    for (const layout of layouts) {
      const stock = await stockImport(layout);
      shardedSeen.add(stock.sharded);
      const ours = await ourFolder(layout, stock.results);
      expect({ layout, cid: cidText(ours.cid), size: ours.size }).toEqual({
        layout,
        cid: cidText(stock.root.cid),
        size: stock.root.size,
      });
    }
    expect([...shardedSeen].sort()).toEqual([false, true]);
  });

  it('counts a subfolder as the importer does, at the size of an empty folder, when it decides', async () => {
    // The most files that stay flat, then a last subfolder named 'y…' whose name length moves
    // the estimate one byte at a time: the importer shards as soon as the subfolder, counted
    // as an empty folder, tips it over. Counted at its real size (a byte more, for its larger
    // Tsize) it would tip one name length sooner.
    const files = (await fewestFilesSharded()) - 1;
    const layoutOf = (length: number): Layout => ({
      files,
      subfolder: { after: files - 1, hasEntries: true, name: 'y'.repeat(length) },
    });
    let flat = 1;
    let sharded = 250;
    expect((await stockImport(layoutOf(flat))).sharded).toBe(false);
    expect((await stockImport(layoutOf(sharded))).sharded).toBe(true);
    while (sharded - flat > 1) {
      const middle = Math.floor((flat + sharded) / 2);
      if ((await stockImport(layoutOf(middle))).sharded) sharded = middle;
      else flat = middle;
    }
    for (const length of [flat, sharded]) {
      const stock = await stockImport(layoutOf(length));
      const ours = await ourFolder(layoutOf(length), stock.results);
      expect({ length, cid: cidText(ours.cid) }).toEqual({ length, cid: cidText(stock.root.cid) });
    }
  });
});
