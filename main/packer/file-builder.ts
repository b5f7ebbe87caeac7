import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type {
  File,
  ImporterOptions,
  ImportResult,
  InProgressImportResult,
  WritableStorage,
} from 'ipfs-unixfs-importer';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { RAW_CODEC } from '../protocol/index.ts';
import { compactCid } from './compact-cid.ts';

// The importer's File node builder, rewritten to the same bytes with less machinery: leaves
// are taken from the buffer importer one after another and handed to the layout as they come.
// The stock builder runs every file, even a one-chunk one, through a parallel batcher and
// several generator stages; on 10 000 small files that was most of the garbage a backup made,
// and enough of it outlived young-generation collection to grow the heap by 100 MB.
//
// Node layout and contents follow ipfs-unixfs-importer 17's reducer exactly (without single
// leaf reduction, which §17.1 forbids), so CIDs do not change: every node of a file, the
// intermediate ones too, is a File carrying the file's mode and mtime; raw leaves of zero
// bytes are left out of the links; a link's Tsize is the bytes of everything under it.

type FileBuilder = NonNullable<ImporterOptions['fileBuilder']>;
type Reducer = (leaves: InProgressImportResult[]) => Promise<InProgressImportResult>;

/** Whether a result belongs among a File node's links (the stock reducer's filter). */
function isLinked(leaf: InProgressImportResult): boolean {
  if (leaf.cid.code === RAW_CODEC) return leaf.size > 0n;
  const unixfs = leaf.unixfs;
  if (unixfs === undefined) return false;
  if (unixfs.data === undefined) return unixfs.fileSize() > 0n;
  return unixfs.data.length > 0;
}

function reducerFor(file: File, blockstore: WritableStorage): Reducer {
  return async (leaves) => {
    const unixfs = new UnixFS({
      type: 'file',
      ...(file.mtime !== undefined ? { mtime: file.mtime } : {}),
      ...(file.mode !== undefined ? { mode: file.mode } : {}),
    });
    const links: dagPb.PBLink[] = [];
    let linkedBytes = 0;
    for (const leaf of leaves) {
      if (!isLinked(leaf)) continue;
      if (leaf.cid.code === RAW_CODEC) unixfs.addBlockSize(leaf.size);
      else if (leaf.unixfs?.data === undefined) unixfs.addBlockSize(leaf.unixfs?.fileSize() ?? 0n);
      else unixfs.addBlockSize(BigInt(leaf.unixfs.data.length));
      links.push({ Name: '', Tsize: Number(leaf.size), Hash: leaf.cid });
      linkedBytes += Number(leaf.size);
    }
    const block = dagPb.encode(dagPb.prepare({ Data: unixfs.marshal(), Links: links }));
    const cid = CID.createV1(dagPb.code, await sha256.digest(block));
    await blockstore.put(cid, block);
    const result: ImportResult & { originalPath?: string } = {
      cid,
      unixfs,
      size: BigInt(block.length + linkedBytes),
    };
    if (file.path !== undefined) result.path = file.path;
    if (file.originalPath !== undefined) result.originalPath = file.originalPath;
    return result;
  };
}

export const fileBuilder: FileBuilder = async (file, blockstore, options) => {
  const importing = options.bufferImporter(file, blockstore)[Symbol.asyncIterator]();
  const leafOf = async (importLeaf: () => Promise<ImportResult>) => {
    const { cid, size } = await importLeaf();
    return { cid, size };
  };
  const first = await importing.next();
  if (first.done === true) throw new Error('the buffer importer gave no leaf');
  const firstLeaf = await leafOf(first.value);
  const second = await importing.next();
  const reduce = reducerFor(file, blockstore);
  // Most files are one chunk: their node is made at once, without the layout's batching.
  const root =
    second.done === true
      ? await reduce([firstLeaf])
      : await options.layout(
          (async function* () {
            yield firstLeaf;
            yield await leafOf(second.value);
            for (
              let next = await importing.next();
              next.done !== true;
              next = await importing.next()
            )
              yield await leafOf(next.value);
          })(),
          reduce,
        );
  // The folder it goes into keeps this until the whole tree is built: only what the folder
  // node needs (its UnixFS data, a few hundred bytes a file, is already in the node's bytes).
  const result: InProgressImportResult = { cid: compactCid(root.cid), size: root.size };
  if (file.path !== undefined) result.path = file.path;
  if (file.originalPath !== undefined) result.originalPath = file.originalPath;
  return result;
};
