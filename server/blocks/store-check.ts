import type { ServiceContext } from '../context.ts';
import { allChunkFileIds, chunkLocation, chunksInFile } from '../store/metadata-chunks.ts';
import type { ChunkLocation } from '../store/metadata-chunks.ts';
import {
  blocksInPack,
  findBlock,
  legacyBlocksAfter,
  packIds,
  type BlockLocation,
} from '../store/stored-blocks.ts';
import { BlockCutShortError } from './block-reader.ts';
import { blockMatchesCid } from './block-matches-cid.ts';

// `canopy-server check`: every stored block and every chunk of the versions' metadata read
// back from the disk and checked against its name, as borg's and restic's checks read a
// repository, so that a failing disk is found while the devices still hold what it lost, rather
// than by a restore. It writes nothing, so it runs beside `serve`; what `serve` moves or
// deletes meanwhile is looked up again rather than reported, and what it moves into files made
// since the check began is checked there.

/** Why a stored block is not whole. */
export type BlockProblemKind = 'damaged' | 'unreadable' | 'missing' | 'cut_short';

export interface BlockProblem {
  readonly cid: string;
  /** The file it is in: a pack, or a block's own file. */
  readonly file: string;
  readonly kind: BlockProblemKind;
}

export interface StoreCheck {
  readonly blocks: number;
  readonly bytes: number;
  readonly chunks: number;
  readonly chunkBytes: number;
  readonly problems: readonly BlockProblem[];
  /** Files of metadata chunks holding chunks that are not whole, with how many. */
  readonly chunkProblems: ReadonlyMap<string, number>;
}

/** Legacy blocks looked up per query. */
const LEGACY_BATCH = 1000;
/**
 * The most of a pack read at once: blocks lying one after the other are read together, the
 * next span while the one before is hashed. Block by block, awaiting each read, a check of
 * 1.1 GB took 1.7-2.3 s here, against 1.6 GB/s for SHA-256 alone.
 */
const SPAN_BYTES = 8 * 1024 * 1024;

/** `blocks` (one pack's, in file order) as spans of blocks lying one after the other. */
function spansOf(blocks: readonly BlockLocation[]): BlockLocation[][] {
  const spans: BlockLocation[][] = [];
  let span: BlockLocation[] = [];
  let end = -1;
  let bytes = 0;
  for (const block of blocks) {
    if (span.length > 0 && (block.offset !== end || bytes + block.size > SPAN_BYTES)) {
      spans.push(span);
      span = [];
      bytes = 0;
    }
    span.push(block);
    end = block.offset + block.size;
    bytes += block.size;
  }
  if (span.length > 0) spans.push(span);
  return spans;
}

/** The kind of problem a failed read of a block shows; undefined for a failure of another kind. */
function problemOf(error: unknown): BlockProblemKind | undefined {
  if (error instanceof BlockCutShortError) return 'cut_short';
  const { code } = error as NodeJS.ErrnoException;
  if (code === 'EIO') return 'unreadable';
  if (code === 'ENOENT') return 'missing';
  return undefined;
}

/**
 * Reads every block and metadata chunk stored in `ctx`'s data folder and checks it against its
 * name. A failure to read other than the disk's (permissions) is thrown.
 */
export async function checkStore(
  ctx: ServiceContext,
  /** Told the bytes of blocks checked so far, after each span of them. */
  onProgress: (bytesDone: number) => void = () => undefined,
): Promise<StoreCheck> {
  const problems: BlockProblem[] = [];
  let blocks = 0;
  let bytes = 0;
  const reader = ctx.blocks.openReader();
  /** Counts a block read, and notes it when `bytes` (undefined: its `kind`) are not its own. */
  const judge = (
    location: BlockLocation,
    read: Buffer | undefined,
    kind: BlockProblemKind = 'damaged',
  ): void => {
    blocks += 1;
    bytes += location.size;
    onProgress(bytes);
    if (read === undefined || !blockMatchesCid(location.cid, read))
      problems.push({ cid: location.cid, file: ctx.blocks.fileOf(location).file, kind });
  };

  let alone = Buffer.allocUnsafe(0);
  /** Reads and judges one block; `lookedUpAgain` once it was found moved. */
  const checkBlock = async (location: BlockLocation, lookedUpAgain = false): Promise<void> => {
    if (alone.length < location.size) alone = Buffer.allocUnsafe(location.size);
    const block = alone.subarray(0, location.size);
    try {
      await reader.readInto(location, block);
    } catch (error) {
      const kind = problemOf(error);
      if (kind === undefined) throw error;
      if (kind === 'missing' && !lookedUpAgain) {
        // Deleted or moved to another pack since it was looked up, by a `serve` of this folder.
        const now = findBlock(ctx.db, location.cid);
        if (now === undefined) return;
        if (now.pack !== location.pack || now.offset !== location.offset)
          return checkBlock(now, true);
      }
      judge(location, undefined, kind);
      return;
    }
    judge(location, block);
  };

  const spanBuffers = [Buffer.allocUnsafe(SPAN_BYTES), Buffer.allocUnsafe(SPAN_BYTES)] as const;
  /** Reads `span` into the start of `into`: what failed, or undefined. Never rejects. */
  const readSpan = (span: readonly BlockLocation[], into: Buffer): Promise<unknown> => {
    const [first] = span;
    const last = span.at(-1);
    if (first === undefined || last === undefined) return Promise.resolve(undefined);
    const size = last.offset + last.size - first.offset;
    // A lone block larger than a span (a server with a larger block limit) is read alone.
    if (size > into.length) return Promise.resolve(new RangeError('larger than a span'));
    return reader.readInto({ ...first, size }, into.subarray(0, size)).then(
      () => undefined,
      (error: unknown) => error ?? new Error('the read failed'),
    );
  };
  /** Checks the blocks of one pack, in file order. */
  const checkPack = async (inPack: readonly BlockLocation[]): Promise<void> => {
    const spans = spansOf(inPack);
    let reading = spans[0] && readSpan(spans[0], spanBuffers[0]);
    for (const [index, span] of spans.entries()) {
      const failed = await reading;
      const next = spans[index + 1];
      reading = next && readSpan(next, spanBuffers[(index + 1) % 2] as Buffer);
      if (failed !== undefined) {
        // Block by block, for what each one is: the span's failure does not say which.
        for (const location of span) await checkBlock(location);
        continue;
      }
      const read = spanBuffers[index % 2] as Buffer;
      const start = span[0]?.offset ?? 0;
      for (const location of span) {
        const at = location.offset - start;
        judge(location, read.subarray(at, at + location.size));
      }
    }
  };

  try {
    // A compaction beside it moves blocks into packs made after the list was taken: those are
    // checked too, until a list holds none not checked, so that every block stored when the
    // check ends was checked where it is. (A block moved from a pack checked already is
    // checked again, and counted twice.)
    const packsChecked = new Set<string>();
    for (let unchecked = packIds(ctx.db); unchecked.length > 0;) {
      for (const pack of unchecked) {
        packsChecked.add(pack);
        await checkPack(blocksInPack(ctx.db, pack));
      }
      unchecked = packIds(ctx.db).filter((pack) => !packsChecked.has(pack));
    }
    for (let after = ''; ;) {
      const batch = legacyBlocksAfter(ctx.db, after, LEGACY_BATCH);
      for (const location of batch) await checkBlock(location);
      const last = batch.at(-1);
      if (last === undefined) break;
      after = last.cid;
    }
  } finally {
    reader.close();
  }
  return { blocks, bytes, problems, ...checkChunks(ctx) };
}

/** Every metadata chunk read back and checked against its digest. */
function checkChunks(ctx: ServiceContext): {
  chunks: number;
  chunkBytes: number;
  chunkProblems: Map<string, number>;
} {
  const chunkProblems = new Map<string, number>();
  let chunks = 0;
  let chunkBytes = 0;
  const stored = ctx.blocks.metadataChunks.storedCopyCheck();
  const isSound = (chunk: ChunkLocation): boolean => {
    if (stored.isSound(chunk)) return true;
    // Moved by a compaction, or released, since it was looked up: checked where it is now.
    const now = chunkLocation(ctx.db, chunk.digest);
    if (now === undefined) return true;
    return now.file === chunk.file && now.offset === chunk.offset ? false : stored.isSound(now);
  };
  try {
    // As for packs (checkStore): files a compaction in another process made meanwhile too.
    const filesChecked = new Set<string>();
    const unchecked = () => [...allChunkFileIds(ctx.db)].filter((id) => !filesChecked.has(id));
    for (let files = unchecked(); files.length > 0; files = unchecked())
      for (const file of files.sort()) {
        filesChecked.add(file);
        for (const chunk of chunksInFile(ctx.db, file)) {
          chunks += 1;
          chunkBytes += chunk.length;
          if (!isSound(chunk)) {
            const path = ctx.blocks.metadataChunks.path(file);
            chunkProblems.set(path, (chunkProblems.get(path) ?? 0) + 1);
          }
        }
      }
  } finally {
    stored.close();
  }
  return { chunks, chunkBytes, chunkProblems };
}
