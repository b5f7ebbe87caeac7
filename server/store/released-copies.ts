import type { BlockLocation } from './stored-blocks.ts';
import type { Db } from './database.ts';
import { deletePack, releasePackBytes } from './packs.ts';

// Stored copies of blocks that no row points at any more (collected, or replaced by a sound
// copy): their packs' live bytes shrink, in the caller's transaction. Their bytes are freed by
// the caller once that commits: a block file of its own is unlinked, a pack left with no live
// block is retired (BlockStore).

export interface ReleasedCopies {
  /** CIDs whose copy was a block file of its own. */
  readonly legacy: string[];
  /** Packs with no live block left, their rows deleted. */
  readonly emptied: string[];
}

export function releaseCopies(db: Db, copies: readonly BlockLocation[]): ReleasedCopies {
  const freedPerPack = new Map<string, number>();
  const legacy: string[] = [];
  for (const copy of copies) {
    if (copy.pack === null) legacy.push(copy.cid);
    else freedPerPack.set(copy.pack, (freedPerPack.get(copy.pack) ?? 0) + copy.size);
  }
  const emptied: string[] = [];
  for (const [pack, bytes] of freedPerPack) {
    if (!releasePackBytes(db, pack, bytes)) continue;
    deletePack(db, pack);
    emptied.push(pack);
  }
  return { legacy, emptied };
}
