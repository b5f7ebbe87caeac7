import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type {
  File,
  ImporterOptions,
  InProgressImportResult,
  WritableStorage,
} from 'ipfs-unixfs-importer';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { RAW_CODEC } from '../protocol/index.ts';
import { unixfsDataBytes } from './unixfs-data.ts';

// A file's node, made as the importer's File node builder makes it, with less machinery: leaves
// are made one after another and handed to the layout as they come.
// The stock builder runs every file, even a one-chunk one, through a parallel batcher and
// several generator stages; on 10 000 small files that was most of the garbage a backup made,
// and enough of it outlived young-generation collection to grow the heap by 100 MB.
//
// Node layout and contents follow ipfs-unixfs-importer 17's reducer exactly (without single
// leaf reduction, which §17.1 forbids), so CIDs do not change: every node of a file, the
// intermediate ones too, is a File carrying the file's mode and mtime; raw leaves of zero
// bytes are left out of the links; a link's Tsize is the bytes of everything under it.

type FileLayout = NonNullable<ImporterOptions['layout']>;
type Reducer = (leaves: InProgressImportResult[]) => Promise<InProgressImportResult>;

/** Whether a result belongs among a File node's links (the stock reducer's filter). */
function isLinked(leaf: InProgressImportResult): boolean {
  if (leaf.cid.code === RAW_CODEC) return leaf.size > 0n;
  const unixfs = leaf.unixfs;
  if (unixfs === undefined) return false;
  if (unixfs.data === undefined) return unixfs.fileSize() > 0n;
  return unixfs.data.length > 0;
}

function reducerFor(file: Pick<File, 'mtime' | 'mode'>, blockstore: WritableStorage): Reducer {
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
    const block = dagPb.encode(dagPb.prepare({ Data: unixfsDataBytes(unixfs), Links: links }));
    const cid = CID.createV1(dagPb.code, await sha256.digest(block));
    await blockstore.put(cid, block);
    return { cid, unixfs, size: BigInt(block.length + linkedBytes) };
  };
}

/** A leaf as the buffer importer hands it over: made (read, hashed, stored) when called. */
export type LeafMaker = () => Promise<{ cid: CID; size: bigint }>;

/**
 * A file's node from its leaves, laid out by `layout`. Returns the node's CID and the bytes
 * under it (its Tsize); the nodes themselves go to `blockstore`.
 */
export async function buildFileNode(
  file: Pick<File, 'mtime' | 'mode'>,
  leaves: AsyncIterable<LeafMaker>,
  blockstore: WritableStorage,
  layout: FileLayout,
): Promise<{ cid: CID; size: bigint }> {
  const importing = leaves[Symbol.asyncIterator]();
  const leafOf = async (makeLeaf: LeafMaker): Promise<InProgressImportResult> => {
    const { cid, size } = await makeLeaf();
    return { cid, size };
  };
  const first = await importing.next();
  if (first.done === true) throw new Error('a file gave no leaf');
  const firstLeaf = await leafOf(first.value);
  const second = await importing.next();
  const reduce = reducerFor(file, blockstore);
  // Most files are one chunk: their node is made at once, without the layout's batching.
  const root =
    second.done === true
      ? await reduce([firstLeaf])
      : await layout(
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
  return { cid: root.cid, size: root.size };
}
