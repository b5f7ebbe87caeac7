import { EngineError, type EngineErrorCode } from '../api/index.ts';
import type { Metadata } from '../protocol/index.ts';
import {
  ChangeTally,
  VersionDiffer,
  type ChangeCounts,
  type VersionChange,
} from '../restore/index.ts';
import type { RestoreProgress } from '../uploader/index.ts';
import type { EngineParts } from './engine-parts.ts';
import { namedById } from './named-by-id.ts';
import { PathsInVersions, type TypedPath } from './paths-in-versions.ts';
import type { VersionBrowser } from './version-browser.ts';

// `canopy diff`: what changed from one version of a bucket to another, by default from the
// version before the active one to the active one. Both trees are read as `canopy ls` reads
// one (version-browser.ts), from the local metadata cache where it keeps them, so that it works
// while the service cannot be reached; the versions are taken from the bucket's list as last
// seen then.

export interface CompareRequest extends TypedPath {
  readonly bucket: string;
  /** The older version, or the start of its id; by default the one made before `to`. */
  readonly from?: string;
  /** The newer version, or the start of its id; by default the bucket's active one. */
  readonly to?: string;
  /** Told the fetch of a version's metadata CAR this computer keeps no copy of. */
  readonly onProgress?: (progress: RestoreProgress) => void;
  /**
   * Handed the changes as they are found, rather than in the result (whose `changes` is then
   * empty): a diff of a million files is written out as it goes instead of held whole.
   */
  readonly onChanges?: ChangeListener;
}

/** Where the changes of a comparison go, a part at a time. */
export interface ChangeListener {
  /** Once, before any change: the versions compared. */
  versions(compared: VersionsCompared): void;
  /** The next changes, in the result's order. */
  changes(changes: readonly VersionChange[]): void;
}

/** Changes handed to a ChangeListener at once. */
const CHANGES_A_PART = 1000;

/** The changes held for the result (none when handed over), and how many of each kind. */
type Told = Pick<ComparedVersions, 'changes' | 'counts'>;

/** A version compared: its id and when it was made (epoch seconds). */
export interface ComparedVersion {
  readonly id: string;
  readonly createdAt: number;
}

/** The two versions of a comparison, and how the bucket's list of versions was had. */
export interface VersionsCompared {
  readonly from: ComparedVersion;
  readonly to: ComparedVersion;
  /** When the bucket's list of versions used was seen; null when the service answered now. */
  readonly offlineSince: number | null;
  /** Why the service did not answer; null when it did. */
  readonly offlineBecause: EngineErrorCode | null;
}

export interface ComparedVersions extends VersionsCompared {
  /**
   * Each entry that differs, in `canopy ls -R` order (VersionDiffer); none when they were
   * handed to the request's `onChanges`.
   */
  readonly changes: VersionChange[];
  /** How many changed each way, also when they were handed over. */
  readonly counts: ChangeCounts;
}

/** Versions whose tree is whole on the service: a pending or failed one may lack data. */
export function isStored(version: Metadata): boolean {
  return version.state === 'active' || version.state === 'outdated';
}

/**
 * The version `to` was made on (its `previous_id`) while the bucket still holds it; else the
 * newest one made before it.
 */
function versionBefore(stored: readonly Metadata[], to: Metadata): Metadata | undefined {
  const previous = stored.find((version) => version.id === to.previous_id);
  if (previous) return previous;
  let newest: Metadata | undefined;
  for (const version of stored)
    if (version.created_at < to.created_at && version.created_at > (newest?.created_at ?? -1))
      newest = version;
  return newest;
}

export class VersionComparison {
  constructor(
    private readonly parts: EngineParts,
    private readonly browser: VersionBrowser,
  ) {}

  async compare(input: CompareRequest): Promise<ComparedVersions> {
    const listed = await this.parts.versions.orLastSeen({ bucket: input.bucket });
    const stored = listed.versions.filter(isStored);
    const what = `versions of bucket "${input.bucket}"`;
    const named = (typed: string): Metadata => {
      const version = namedById(listed.versions, typed, what);
      if (!version)
        throw new EngineError(
          'not_found',
          `bucket "${input.bucket}" has no version ${typed} (canopy versions lists them)`,
        );
      return version;
    };
    const to =
      input.to === undefined
        ? stored.find((version) => version.state === 'active')
        : named(input.to);
    if (!to) throw new EngineError('not_found', `bucket "${input.bucket}" has no version yet`);
    const from = input.from === undefined ? versionBefore(stored, to) : named(input.from);
    if (!from)
      throw new EngineError(
        'not_found',
        `version ${to.id} is the oldest of bucket "${input.bucket}": there is none before it to compare it with (--from names one)`,
      );
    const request = {
      bucket: input.bucket,
      ...(input.onProgress ? { onProgress: input.onProgress } : {}),
    };
    // Either version may be of the bucket's folder under a former name.
    const paths = new PathsInVersions(this.browser, input.bucket, input.path, true, input.typedIn);
    const between: VersionsCompared = {
      from: { id: from.id, createdAt: from.created_at },
      to: { id: to.id, createdAt: to.created_at },
      offlineSince: listed.offlineSince,
      offlineBecause: listed.offlineBecause,
    };
    const listener = input.onChanges;
    /** Changes handed to the listener so far, by this attempt or one before. */
    let handedOver = 0;
    let attempts = 0;
    /**
     * Tells each change, or holds it for the result; and counts them. A version whose kept copy
     * turns out damaged part way is pulled again and compared again (VersionBrowser.reading):
     * that attempt finds the same changes first, from nodes each checked against its CID, and
     * hands over only those past the ones handed over already.
     */
    const tell = (differ: VersionDiffer): Told => {
      if (attempts++ === 0) listener?.versions(between);
      const tally = new ChangeTally();
      const held: VersionChange[] = [];
      let found = 0;
      const handOver = (): void => {
        listener?.changes(held.splice(0));
        handedOver = found;
      };
      for (const change of differ.changes()) {
        tally.add(change);
        found += 1;
        if (found <= handedOver) continue;
        held.push(change);
        if (listener && held.length === CHANGES_A_PART) handOver();
      }
      if (listener && held.length > 0) handOver();
      return { changes: held, counts: tally.counts };
    };
    const { value: told } = await this.browser.reading(
      { ...request, version: from.id },
      async (older) => {
        const olderPath = (await paths.in(older.manifest['source_label'])).path;
        const compared = await this.browser.reading(
          { ...request, version: to.id },
          async (newer) => {
            const newerPath = (await paths.in(newer.manifest['source_label'])).path;
            return tell(new VersionDiffer(older, newer, newerPath, olderPath));
          },
        );
        return compared.value;
      },
    );
    return { ...between, ...told };
  }
}
