import { EngineError, type EngineErrorCode } from '../api/index.ts';
import type { Metadata } from '../protocol/index.ts';
import {
  itemChange,
  itemLookAt,
  type ItemChangeKind,
  type ItemLook,
  type VersionEntry,
} from '../restore/index.ts';
import type { RestoreProgress } from '../uploader/index.ts';
import type { EngineParts } from './engine-parts.ts';
import { isStored } from './version-comparison.ts';
import type { VersionBrowser } from './version-browser.ts';

// `canopy history`: the versions of a bucket in which one file, folder or link differs from the
// version before, newest first, so that a user finds the copy to restore (the report as it was
// before Tuesday's edit) without listing every version by hand. Each version's tree is read as
// `canopy ls` reads it (version-browser.ts): from the local metadata cache where it keeps it,
// else pulled once into the cache; offline, from the versions kept.

export interface HistoryRequest {
  readonly bucket: string;
  /** The item, as `canopy ls` takes a path. */
  readonly path: string;
  readonly onProgress?: (progress: HistoryProgress) => void;
}

/** How far a history got, told before each version is read and once all are. */
export interface HistoryProgress {
  /** Versions read or passed over, of all the history reads. */
  readonly versionsDone: number;
  readonly versionsTotal: number;
  /** The fetch of the next version's metadata CAR, when this computer keeps no copy of it. */
  readonly pulling: RestoreProgress | null;
}

/** A version in which the item differs from the version before it. */
export interface ItemVersion {
  readonly versionId: string;
  /** When the version was made (epoch seconds). */
  readonly createdAt: number;
  /** How it differs: `added` in the oldest version read that holds it. */
  readonly change: ItemChangeKind;
  /** The item as this version holds it; null when it was removed. */
  readonly entry: VersionEntry | null;
}

export interface ItemHistory {
  readonly path: string;
  /** How many versions were read. */
  readonly versionsRead: number;
  /** Each version in which the item differs from the one read before it, newest first. */
  readonly changes: ItemVersion[];
  /** Versions whose tree could not be read, and why: the history passes over them. */
  readonly unread: Array<{ readonly versionId: string; readonly reason: string }>;
  /** When the bucket's list of versions used was seen; null when the service answered now. */
  readonly offlineSince: number | null;
  /** Why the service did not answer; null when it did. */
  readonly offlineBecause: EngineErrorCode | null;
}

/** Oldest first: by when each was made, the list's own order (newest first) breaking ties. */
function oldestFirst(versions: readonly Metadata[]): Metadata[] {
  return versions
    .map((version, index) => ({ version, index }))
    .sort((a, b) => a.version.created_at - b.version.created_at || b.index - a.index)
    .map(({ version }) => version);
}

export class ItemHistoryReader {
  constructor(
    private readonly parts: EngineParts,
    private readonly browser: VersionBrowser,
  ) {}

  async history(input: HistoryRequest): Promise<ItemHistory> {
    const listed = await this.parts.versions.orLastSeen({ bucket: input.bucket });
    const changes: ItemVersion[] = [];
    const unread: Array<{ versionId: string; reason: string; error: EngineError }> = [];
    let versionsRead = 0;
    let found = false;
    /** The item in the last version read; undefined where it holds nothing there. */
    let before: ItemLook | undefined;
    const stored = oldestFirst(listed.versions.filter(isStored));
    const { onProgress } = input;
    for (const [done, version] of stored.entries()) {
      const report = (pulling: RestoreProgress | null): void =>
        onProgress?.({ versionsDone: done, versionsTotal: stored.length, pulling });
      report(null);
      let look: ItemLook | undefined;
      try {
        ({ value: look } = await this.browser.reading(
          {
            bucket: input.bucket,
            version: version.id,
            ...(onProgress ? { onProgress: report } : {}),
          },
          (tree) => itemLookAt(tree, input.path),
        ));
      } catch (error) {
        // One version damaged, deleted meanwhile or not kept here while offline: the others
        // still tell the item's history, and the output names the one passed over.
        if (!(error instanceof EngineError)) throw error;
        unread.push({ versionId: version.id, reason: error.message, error });
        continue;
      }
      versionsRead += 1;
      found ||= look !== undefined;
      const change = itemChange(before, look);
      if (change !== undefined)
        changes.push({
          versionId: version.id,
          createdAt: version.created_at,
          change,
          entry: look?.entry ?? null,
        });
      before = look;
    }
    onProgress?.({ versionsDone: stored.length, versionsTotal: stored.length, pulling: null });
    if (versionsRead === 0 && unread[0]) throw unread[0].error;
    if (versionsRead === 0)
      throw new EngineError('not_found', `bucket "${input.bucket}" has no version yet`);
    if (!found)
      throw new EngineError(
        'not_found',
        unread[0]
          ? `none of the ${versionsRead} versions of bucket "${input.bucket}" read holds ${input.path}; ${unread.length} could not be read (${unread[0].reason})`
          : `no version of bucket "${input.bucket}" holds ${input.path} (canopy ls shows what the active one holds)`,
      );
    return {
      path: input.path,
      versionsRead,
      changes: changes.reverse(),
      unread: unread.map(({ versionId, reason }) => ({ versionId, reason })),
      offlineSince: listed.offlineSince,
      offlineBecause: listed.offlineBecause,
    };
  }
}
