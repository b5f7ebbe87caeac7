import type { VersionChange, VersionChangeKind } from './version-diff.ts';

// How many entries changed each way between two versions, and the bytes of the files added or
// modified: `canopy diff`'s closing line, counted as the changes go by, so that a diff handed
// over a part at a time (a million changed files) needs none of them held to tell it.

export interface ChangeCounts {
  readonly added: number;
  readonly removed: number;
  readonly modified: number;
  /** Entries with only their mode or modification time changed. */
  readonly metadata: number;
  /** Files that became folders or links, and the other way round. */
  readonly type: number;
  /** The bytes of the files added or modified, as the newer version holds them. */
  readonly fileBytesAddedOrModified: number;
}

/** Counts changes as they are told. */
export class ChangeTally {
  private readonly kinds: Record<VersionChangeKind, number> = {
    added: 0,
    removed: 0,
    modified: 0,
    metadata: 0,
    type: 0,
  };
  private fileBytes = 0;

  add(change: VersionChange): void {
    this.kinds[change.change] += 1;
    if (
      (change.change === 'added' || change.change === 'modified') &&
      change.after?.type === 'file'
    )
      this.fileBytes += change.after.size;
  }

  get counts(): ChangeCounts {
    return { ...this.kinds, fileBytesAddedOrModified: this.fileBytes };
  }
}
