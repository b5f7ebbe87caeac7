import type { CarBlock } from '../../main/protocol/index.ts';
import { findBlock } from '../store/stored-blocks.ts';
import type { Db } from '../store/database.ts';
import type { BlockStore } from './block-store.ts';

// A shard may name a block the host stores already. Its bytes were checked against its CID as
// they arrived (§11.2), and the stored copy is compared with them here: a copy damaged on this
// disk since it was written (a bad sector, a bit flipped), or no longer readable, is replaced
// by the one that came, in this shard's pack. That is how a client heals a block its restore or
// verify found damaged: it sends the block again. Most shards name no stored block, and a
// comparison costs one read of the stored copy.

/** Whether `block`'s bytes are `stored`'s. */
function sameBytes(block: CarBlock, stored: Buffer): boolean {
  if (stored.length !== block.length) return false;
  let at = 0;
  for (const piece of block.pieces) {
    if (!stored.subarray(at, at + piece.length).equals(piece)) return false;
    at += piece.length;
  }
  return true;
}

/**
 * The CIDs among `blocks` (arrived, checked, and stored already, by `cids` at the same index)
 * whose stored copy differs from the bytes that came, or cannot be read.
 */
export async function damagedStoredCopies(
  db: Db,
  store: BlockStore,
  blocks: readonly CarBlock[],
  cids: readonly string[],
): Promise<Set<string>> {
  const damaged = new Set<string>();
  if (blocks.length === 0) return damaged;
  const reader = store.openReader();
  try {
    for (const [index, block] of blocks.entries()) {
      const cid = cids[index] ?? '';
      const location = findBlock(db, cid);
      // Collected meanwhile: pinned blocks are not, and the commit says so (anyCollected).
      if (!location) continue;
      let stored: Buffer | undefined;
      try {
        stored = await reader.read(location);
      } catch {
        // Unreadable (EIO, cut short, its file gone): the copy that came takes its place.
        stored = undefined;
      }
      if (!stored || !sameBytes(block, stored)) damaged.add(cid);
    }
  } finally {
    reader.close();
  }
  return damaged;
}
