import type { ExcludeRules } from '../scanner/index.ts';
import { sourceRootEntry, walkSource, type SourceEntry } from '../scanner/index.ts';
import type { IndexedEntry, SourceFileIndex } from '../state/index.ts';

// Compares a source with its file index in one walk. A source has not changed since the
// version the index describes when every entry the walk finds is in the index with the same
// kind, mode, mtime and inode (and a file's size, a symlink's target), and nothing else is.
// Without progress to report, the walk stops at the first difference, so a changed source pays
// for the check only up to there. With progress, it goes on to the end: the same walk then
// gives the reading phase its totals, which took a second walk of the whole source (and an
// index lookup per file) before.

function sameEntry(found: SourceEntry, known: IndexedEntry | undefined): boolean {
  if (!known || known.kind !== found.kind) return false;
  if (known.mode !== found.mode || known.mtimeNs !== found.mtimeNs || known.ino !== found.ino)
    return false;
  switch (found.kind) {
    case 'file':
      return known.size === found.size;
    case 'symlink':
      return known.target === found.target;
    case 'directory':
      return true;
  }
}

/** A file packing need not read again: its index entry still has its size, mtime and inode. */
export function indexVouchesFor(
  found: { readonly size: number; readonly mtimeNs: bigint; readonly ino: bigint },
  known: IndexedEntry | undefined,
): known is IndexedEntry & { readonly kind: 'file'; readonly cid: string } {
  return (
    known?.kind === 'file' &&
    known.cid !== null &&
    known.size === found.size &&
    known.mtimeNs === found.mtimeNs &&
    known.ino === found.ino
  );
}

export interface SourceSurvey {
  /** Every entry matches the index, and the index holds no other. */
  readonly unchanged: boolean;
  readonly files: number;
  readonly bytes: number;
  /** Bytes of the files packing must read: those the index cannot vouch for. */
  readonly bytesToRead: number;
}

/**
 * Walks the source against the index. `stopAtChange`: return 'changed' at the first
 * difference instead of walking on for the totals.
 */
export async function surveySource(
  sourceDir: string,
  rules: ExcludeRules,
  index: SourceFileIndex,
  stopAtChange: boolean,
): Promise<SourceSurvey | 'changed'> {
  // An index of no version vouches for nothing; its lookups would all miss.
  const indexed = index.versionId !== null;
  let unchanged = indexed && sameEntry(sourceRootEntry(sourceDir), index.lookup(''));
  if (!unchanged && stopAtChange) return 'changed';
  let seen = 1;
  let files = 0;
  let bytes = 0;
  let bytesToRead = 0;
  for await (const entry of walkSource(sourceDir, {
    rules,
    onSkip: () => {
      unchanged = false;
    },
  })) {
    const known = indexed ? index.lookup(entry.path) : undefined;
    if (unchanged && !sameEntry(entry, known)) unchanged = false;
    if (!unchanged && stopAtChange) return 'changed';
    seen += 1;
    if (entry.kind !== 'file') continue;
    files += 1;
    bytes += entry.size;
    if (!indexVouchesFor(entry, known)) bytesToRead += entry.size;
  }
  unchanged &&= seen === index.entryCount;
  if (!unchanged && stopAtChange) return 'changed';
  return { unchanged, files, bytes, bytesToRead };
}
