import { MOST_BLOCKS_NAMED } from '../../main/protocol/index.ts';
import type { BlockLocation } from '../store/stored-blocks.ts';
import { isDiskFailure } from '../store/disk-failure.ts';
import { BlockCutShortError } from './block-reader.ts';
import type { BlockStore } from './block-store.ts';

// Blocks this disk failed to read (EIO: a bad sector under a pack; or their pack gone, or cut
// short: a disk repaired by fsck, a copy of the data folder that did not finish) while a
// blocks/car answer was being sent. That answer's headers were out, so it could only be cut
// short, and the client, which asks again for what did not come, would meet the same cut every
// time: one bad sector would fail a whole restore. So the blocks are noted, and the next
// request for any of them is refused before its first byte with a 404, as §11.5 has it for a
// block the host cannot give, naming them; the client asks again for the others, and restores
// everything else.
//
// A noted block is read again before it is refused, so one that reads now (the failure passed,
// a client sent it again and it was replaced, or it only shared a failed read with the block
// that is bad) is served and forgotten. Kept in memory: a restart reads every block afresh.

/** The most blocks noted: past this, the first noted are forgotten (and met again, if bad). */
const MOST_NOTED = 100_000;

/**
 * Whether `error`, of reading a stored block, means the block cannot be read from this disk,
 * rather than a failure of this process (out of file descriptors, say).
 */
function isUnreadable(error: unknown): boolean {
  return (
    isDiskFailure(error) ||
    error instanceof BlockCutShortError ||
    (error as { code?: unknown } | undefined)?.code === 'ENOENT'
  );
}

export class UnreadableBlocks {
  private readonly noted = new Set<string>();

  /** Notes `cids`, whose read failed with `error`, when that says they cannot be read. */
  noteIfUnreadable(cids: Iterable<string>, error: unknown): void {
    if (!isUnreadable(error)) return;
    for (const cid of cids) {
      this.noted.delete(cid);
      this.noted.add(cid);
    }
    for (const oldest of this.noted) {
      if (this.noted.size <= MOST_NOTED) break;
      this.noted.delete(oldest);
    }
  }

  /**
   * Those of `locations` noted as unreadable that still fail to read, by CID, at most
   * MOST_BLOCKS_NAMED of them (a refusal names them: a client that had to find each by halving
   * its request would make tens of requests per block, against its rate limit); those that
   * read now are forgotten. Empty when all can be served.
   */
  async stillUnreadable(store: BlockStore, locations: Iterable<BlockLocation>): Promise<string[]> {
    const still: string[] = [];
    if (this.noted.size === 0) return still;
    for (const location of locations) {
      if (!this.noted.has(location.cid)) continue;
      const reader = store.openReader();
      try {
        await reader.read(location);
        this.noted.delete(location.cid);
      } catch (error) {
        if (!isUnreadable(error)) throw error;
        still.push(location.cid);
        if (still.length >= MOST_BLOCKS_NAMED) break;
      } finally {
        reader.close();
      }
    }
    return still;
  }
}
