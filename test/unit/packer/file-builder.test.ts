import { randomBytes } from 'node:crypto';
import { importer, type ImportCandidate, type ImporterOptions } from 'ipfs-unixfs-importer';
import { fixedSize } from 'ipfs-unixfs-importer/chunker';
import { balanced } from 'ipfs-unixfs-importer/layout';
import type { CID } from 'multiformats/cid';
import { describe, expect, it } from 'vitest';
import { buildFileNode, type LeafMaker } from '../../../main/packer/file-builder.ts';
import { cidText, rawCidOf } from '../../../main/protocol/index.ts';

/** Every block an import writes, by CID text, and each entry's CID by path. */
async function importAll(
  candidates: ImportCandidate[],
  options: ImporterOptions,
): Promise<{ blocks: Map<string, Uint8Array>; entries: Map<string, string> }> {
  const blocks = new Map<string, Uint8Array>();
  const store = {
    put: (cid: CID, bytes: Uint8Array) => {
      blocks.set(cidText(cid), bytes);
      return Promise.resolve(cid);
    },
  };
  const entries = new Map<string, string>();
  for await (const entry of importer(candidates, store, options))
    entries.set(entry.path ?? '', cidText(entry.cid));
  return { blocks, entries };
}

describe('buildFileNode', () => {
  it("writes the stock builder's blocks, byte for byte, for files one to four levels deep", async () => {
    const mtime = { secs: 1_300_000_000n, nsecs: 5 };
    const sizes = [0, 1, 1023, 1024, 1025, 3 * 1024, 3 * 1024 + 1, 9 * 1024 + 1, 40 * 1024 + 3];
    const contents = sizes.map((size) => randomBytes(size));
    const metaOf = (index: number) => ({
      mode: 0o640 + (index % 8),
      ...(index % 2 === 0 ? { mtime } : {}),
    });
    // Small chunks and three links per node, so that a few KiB make a DAG several levels deep.
    const layout = balanced({ maxChildrenPerNode: 3 });
    const stock = await importAll(
      contents.map((content, index) => ({ path: `f${index}`, content, ...metaOf(index) })),
      {
        cidVersion: 1,
        rawLeaves: true,
        reduceSingleLeafToSelf: false,
        chunker: fixedSize({ chunkSize: 1024 }),
        layout,
      },
    );
    const blocks = new Map<string, Uint8Array>();
    const store = {
      put: (cid: CID, bytes: Uint8Array) => {
        blocks.set(cidText(cid), bytes);
        return Promise.resolve(cid);
      },
    };
    for (const [index, content] of contents.entries()) {
      // The fixed-size chunker's chunks: one empty chunk for an empty file.
      const chunks: Uint8Array[] = [];
      for (let offset = 0; offset < content.length || offset === 0; offset += 1024) {
        chunks.push(content.subarray(offset, offset + 1024));
        if (content.length === 0) break;
      }
      const leaves = (async function* (): AsyncGenerator<LeafMaker> {
        await Promise.resolve();
        for (const chunk of chunks)
          yield async () => {
            const cid = await rawCidOf(chunk);
            await store.put(cid, chunk);
            return { cid, size: BigInt(chunk.length) };
          };
      })();
      const made = await buildFileNode(metaOf(index), leaves, store, layout);
      expect(cidText(made.cid)).toBe(stock.entries.get(`f${index}`));
    }
    expect([...blocks.keys()].sort()).toEqual([...stock.blocks.keys()].sort());
    expect(stock.entries.size).toBe(sizes.length);
  });
});
