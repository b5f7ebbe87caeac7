import type { ServiceContext } from '../context.ts';
import { blocksInPack, moveBlock } from '../store/stored-blocks.ts';
import { deletePack, insertPack, sparsePacks } from '../store/packs.ts';
import type { PackWriter } from './pack-writer.ts';
import { compactEach, type PassedOver } from './compact-each.ts';
import { blockMatchesCid } from './block-matches-cid.ts';

// Compaction: a pack whose blocks were mostly collected (old versions deleted or expired) is
// rewritten with only its live blocks, and the old file goes. Without it, a pack that keeps one
// live block would keep all its dead bytes on disk for ever.

/** A pack with less than this share of live bytes is rewritten. */
export const COMPACT_BELOW_LIVE_SHARE = 0.5;

/**
 * Rewrites up to `max` sparse packs, most wasted bytes first, leaving out those in `skip`
 * (compactEach); returns how many.
 */
export function compactSparsePacks(
  ctx: ServiceContext,
  max: number,
  skip: PassedOver,
): Promise<number> {
  const sparse = sparsePacks(ctx.db, COMPACT_BELOW_LIVE_SHARE, max + skip.size);
  return compactEach(
    sparse.map((pack) => ({ id: pack.id, liveBytes: pack.live_bytes })),
    max,
    skip,
    (id) => compactPack(ctx, id),
    'pack(s)',
  );
}

/**
 * Copies the pack's live blocks to a new pack, each checked against its CID first (a pack
 * holding one that is not whole is left as it is), then, in one transaction, points their rows at
 * the copies and forgets the old pack. Blocks collected while copying stay behind as dead bytes
 * of the new pack. Readers that looked blocks up before the switch keep the old file open, so
 * it is unlinked only once they are done (BlockStore.retirePack).
 */
async function compactPack(ctx: ServiceContext, id: string): Promise<void> {
  const reader = ctx.blocks.openReader();
  let copy: PackWriter | undefined;
  let copyInPlace = false;
  let copyCommitted = false;
  try {
    const moved: Array<{ cid: string; size: number; offset: number }> = [];
    for (const block of blocksInPack(ctx.db, id)) {
      copy ??= await ctx.blocks.startPack();
      const bytes = await reader.read(block);
      // A copy is made only of what is whole: a block read back wrong (a bad sector, a bit
      // flipped on the way) would otherwise take the place of the one file that may still hold
      // it right, when only this read went wrong.
      if (!blockMatchesCid(block.cid, bytes))
        throw new Error(
          `block ${block.cid} no longer matches its CID on the disk (damaged); the pack is left as it is, and a client that sends the block again replaces it (canopy-server check lists every such block)`,
        );
      moved.push({ cid: block.cid, size: block.size, offset: copy.append(bytes) });
      await copy.ready();
    }
    await copy?.finish();
    const target = copy;
    ctx.transact(() => {
      let live = 0;
      for (const block of moved) {
        if (target && moveBlock(ctx.db, block.cid, id, target.id, block.offset)) live += block.size;
      }
      // Packs are never appended to, so every block still in this one was in the list above.
      if (blocksInPack(ctx.db, id).length > 0)
        throw new Error(`pack ${id} gained blocks while it was compacted`);
      deletePack(ctx.db, id);
      if (target && live > 0) {
        insertPack(ctx.db, target.id, target.length, live);
        copyInPlace = true;
        ctx.blocks.commitPack(target);
      }
    });
    copyCommitted = copyInPlace;
    ctx.blocks.retirePack(id);
  } finally {
    try {
      if (copy && !copyCommitted) {
        if (copyInPlace) ctx.blocks.removeUncommittedPack(copy.id);
        else await copy.discard();
      }
    } finally {
      // Last: a close that fails (the disk pulled out) must not leave an unfinished copy.
      reader.close();
    }
  }
}
