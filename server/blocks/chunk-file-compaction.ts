import type { ServiceContext } from '../context.ts';
import {
  chunksInFile,
  emptyChunkFile,
  insertChunkFile,
  moveChunk,
  sparseChunkFiles,
} from '../store/metadata-chunks.ts';
import { compactEach, type PassedOver } from './compact-each.ts';

// Compaction of the files of metadata chunks (metadata-chunk-files.ts), as pack-compaction.ts
// does for packs: a file whose chunks mostly went with the versions that named them is copied
// with its live chunks alone, and goes. Without it, a file keeps all of its bytes for as long
// as one of its chunks is named: the first version's CAR whole, once any later version shares
// a chunk of it.

/** A file with less than this share of live bytes is rewritten. */
export const COMPACT_CHUNK_FILES_BELOW_LIVE_SHARE = 0.5;

/**
 * Rewrites up to `max` sparse files of chunks, most dead bytes first, leaving out those in
 * `skip` (compactEach); returns how many.
 */
export function compactChunkFiles(
  ctx: ServiceContext,
  max: number,
  skip: PassedOver,
): Promise<number> {
  const sparse = sparseChunkFiles(ctx.db, COMPACT_CHUNK_FILES_BELOW_LIVE_SHARE, max + skip.size);
  return compactEach(
    sparse.map((file) => ({ id: file.id, liveBytes: file.live_bytes })),
    max,
    skip,
    (id) => compactChunkFile(ctx, id),
    'file(s) of metadata chunks',
  );
}

/**
 * Copies the file's live chunks to a new file, then, in one transaction, points their rows at
 * the copies and leaves the old file with none, for the retiring of dead files to move away
 * (ServiceContext.retireDeadChunkFiles). Chunks that went while they were copied stay behind as
 * dead bytes of the copy. A pull that looked chunks up before reads them where the old file was
 * retired to.
 */
async function compactChunkFile(ctx: ServiceContext, id: string): Promise<void> {
  const chunks = chunksInFile(ctx.db, id);
  const copy = await ctx.blocks.metadataChunks.writeCopy(id, chunks);
  let copyInPlace = false;
  try {
    copyInPlace = ctx.transact(() => {
      let liveChunks = 0;
      let liveBytes = 0;
      let totalBytes = 0;
      chunks.forEach((chunk, index) => {
        totalBytes += chunk.length;
        if (moveChunk(ctx.db, chunk.digest, id, copy.file, copy.offsets[index] ?? 0)) {
          liveChunks += 1;
          liveBytes += chunk.length;
        }
      });
      // Files are never added to: every chunk still in this one was in the list above.
      emptyChunkFile(ctx.db, id);
      if (liveChunks === 0) return false;
      insertChunkFile(ctx.db, copy.file, liveChunks, totalBytes, liveBytes);
      return true;
    });
  } finally {
    if (!copyInPlace) ctx.blocks.metadataChunks.removeUncommitted(copy.file);
  }
  ctx.housekeep('retire a compacted file of metadata chunks', () => ctx.retireDeadChunkFiles());
}
