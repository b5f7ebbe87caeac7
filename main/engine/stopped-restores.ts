import { giveModesBack, removeLeftTemporaries } from '../restore/index.ts';
import { RestoreMark } from '../state/index.ts';

/**
 * Tidies after the restores that were killed part-way, wherever they were restoring to: removes
 * the files they left under their temporary names, then gives back their modes the read-only
 * folders they had opened to write into. Returns how many files it removed. A stopped
 * restore's mark stays while some may be left (its target's disk is not mounted, or a folder
 * cannot be read), so that a later run looks again.
 */
export function tidyStoppedRestores(home: string): number {
  let removed = 0;
  for (const { mark, target } of RestoreMark.stopped(home)) {
    try {
      const left = removeLeftTemporaries(target, mark.token);
      removed += left.removed;
      // After the temporaries: the folders it opened let them be removed.
      if (!left.someLeft && giveModesBack(mark.openedFolders())) mark.end();
    } finally {
      mark.release();
    }
  }
  return removed;
}
