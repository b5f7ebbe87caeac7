import type { UnavailableBlockReport } from '../restore/index.ts';
import { noteBlocksToResend, type StateDb } from '../state/index.ts';

/**
 * Notes blocks the host could not give back whole for the bucket's next backup to send again
 * (backupSource's resendLeaves), from whichever of its versions they were asked: by a
 * backup's check, a verify or a restore.
 */
export function noteUnavailableBlocks(
  db: StateDb,
  bucketId: string,
  unavailable: readonly UnavailableBlockReport[],
  now: number,
): void {
  if (unavailable.length === 0) return;
  noteBlocksToResend(
    db,
    bucketId,
    unavailable.map((block) => block.cid),
    now,
  );
}
