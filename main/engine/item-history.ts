import path from 'node:path';
import { EngineError, type EngineErrorCode } from '../api/index.ts';
import type { Metadata } from '../protocol/index.ts';
import {
  itemChange,
  itemLookAt,
  pathInSource,
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
  /** The folder a relative `path` was typed in (TypedPath). */
  readonly typedIn?: string;
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

/** Newest first: by when each was made, the list's own order (newest first) breaking ties. */
function newestFirst(versions: readonly Metadata[]): Metadata[] {
  return versions
    .map((version, index) => ({ version, index }))
    .sort((a, b) => b.version.created_at - a.version.created_at || a.index - b.index)
    .map(({ version }) => version);
}

export class ItemHistoryReader {
  constructor(
    private readonly parts: EngineParts,
    private readonly browser: VersionBrowser,
  ) {}

  async history(input: HistoryRequest): Promise<ItemHistory> {
    const listed = await this.parts.versions.orLastSeen({ bucket: input.bucket });
    const unread: Array<{ versionId: string; reason: string; error: EngineError }> = [];
    /** The item in each version read, newest first; undefined where it holds nothing there. */
    const read: Array<{ version: Metadata; look: ItemLook | undefined }> = [];
    // Newest first: an absolute path is the item's path on disk now, in the folder the newest
    // version was backed up from, and is taken from that folder's top in every older version,
    // also those of the folder under its old name (--replace-source).
    const stored = newestFirst(listed.versions.filter(isStored));
    let asked = input.path;
    /**
     * A relative path as typed in a folder, where it lies: taken from the top of the first
     * version whose folder holds it (paths-in-versions.ts); until then, from each version's top.
     */
    let typedThere =
      input.typedIn === undefined || path.isAbsolute(input.path)
        ? undefined
        : path.resolve(input.typedIn, input.path);
    const { onProgress } = input;
    for (const [done, version] of stored.entries()) {
      const report = (pulling: RestoreProgress | null): void =>
        onProgress?.({ versionsDone: done, versionsTotal: stored.length, pulling });
      report(null);
      try {
        const { value: look } = await this.browser.reading(
          {
            bucket: input.bucket,
            version: version.id,
            ...(onProgress ? { onProgress: report } : {}),
          },
          (tree) => {
            const label = tree.manifest['source_label'];
            const fromThere =
              typedThere === undefined
                ? undefined
                : pathInSource(typedThere, label, this.parts.computer());
            if (fromThere !== undefined) {
              asked = fromThere;
              typedThere = undefined;
            } else asked = pathInSource(asked, label, this.parts.computer()) ?? asked;
            return itemLookAt(tree, asked);
          },
        );
        read.push({ version, look });
      } catch (error) {
        // One version damaged, deleted meanwhile or not kept here while offline: the others
        // still tell the item's history, and the output names the one passed over.
        if (!(error instanceof EngineError)) throw error;
        unread.push({ versionId: version.id, reason: error.message, error });
      }
    }
    const changes: ItemVersion[] = [];
    for (const [index, { version, look }] of read.entries()) {
      const change = itemChange(read[index + 1]?.look, look);
      if (change !== undefined)
        changes.push({
          versionId: version.id,
          createdAt: version.created_at,
          change,
          entry: look?.entry ?? null,
        });
    }
    const versionsRead = read.length;
    const found = read.some(({ look }) => look !== undefined);
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
      changes,
      unread: unread.map(({ versionId, reason }) => ({ versionId, reason })),
      offlineSince: listed.offlineSince,
      offlineBecause: listed.offlineBecause,
    };
  }
}
