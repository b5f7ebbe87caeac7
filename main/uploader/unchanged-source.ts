import type { ExcludeRules } from '../scanner/index.ts';
import { sourceRootEntry, walkSource, type SourceEntry } from '../scanner/index.ts';
import type { IndexedEntry, SourceFileIndex } from '../state/index.ts';

// Recognises a source that has not changed since the version its file index describes: every
// entry the walk finds is in the index with the same kind, mode, mtime and inode (and a file's
// size, a symlink's target), and nothing else is. The walk stops at the first difference, so a
// changed source pays for this check only up to there.

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

export interface UnchangedSource {
  readonly files: number;
  readonly bytes: number;
}

/** The source's file count and size when it matches the index exactly; null otherwise. */
export async function unchangedSince(
  sourceDir: string,
  rules: ExcludeRules,
  index: SourceFileIndex,
): Promise<UnchangedSource | null> {
  if (index.versionId === null) return null;
  if (!sameEntry(sourceRootEntry(sourceDir), index.lookup(''))) return null;
  let seen = 1;
  let files = 0;
  let bytes = 0;
  let skipped = false;
  for await (const entry of walkSource(sourceDir, { rules, onSkip: () => (skipped = true) })) {
    if (skipped || !sameEntry(entry, index.lookup(entry.path))) return null;
    seen += 1;
    if (entry.kind === 'file') {
      files += 1;
      bytes += entry.size;
    }
  }
  return !skipped && seen === index.entryCount ? { files, bytes } : null;
}
