import { EngineError, isEngineError, type EngineErrorCode } from '../api/index.ts';
import { listVersionPath, type VersionEntry } from '../restore/index.ts';
import {
  listingPhase,
  openBrowsableTree,
  pullPhase,
  type BrowsableTree,
  type RestoreProgress,
} from '../uploader/index.ts';
import type { Metadata } from '../protocol/index.ts';
import {
  bucketIdsNamed,
  bucketsKnownToHoldVersion,
  lastKnownActiveVersion,
  lastKnownVersions,
} from '../state/index.ts';
import { refuseVersionAndSnapshot } from './bucket-versions.ts';
import { namedById } from './named-by-id.ts';
import { PathsInVersions, type TypedPath } from './paths-in-versions.ts';
import type { PullProgress } from './metadata-cache.ts';
import type { EngineParts } from './engine-parts.ts';
import { NO_RETRY, UNREACHABLE, unreachableWithDamagedCopy } from './unreachable.ts';
import { usingTree } from './using-tree.ts';

// Browsing a version's tree (`canopy ls`): from the local metadata cache, so that it is instant
// once the version is kept, and works while the service cannot be reached.

/** A version of a bucket, as a request names it: the bucket's active one by default. */
export interface VersionRequest {
  readonly bucket: string;
  readonly version?: string;
  readonly snapshot?: string;
  /**
   * Told the fetch of the version's metadata CAR (the 'pulling' phase, as a restore's), when
   * this computer keeps no copy of it: browsing is instant only once it is kept. A listing of
   * everything below a folder is told too, once it takes long enough to be seen ('listing').
   */
  readonly onProgress?: (progress: RestoreProgress) => void;
}

export interface BrowseRequest extends VersionRequest, TypedPath {
  /** Everything below the folder at `path`, each entry with its path below it. */
  readonly recursive?: boolean;
}

/** Which version was read, and whether the service answered. */
export interface VersionShown {
  readonly versionId: string;
  /** When the version shown was seen active; null when the service answered now. */
  readonly offlineSince: number | null;
  /** Why the service did not answer; null when it did. */
  readonly offlineBecause: EngineErrorCode | null;
}

export interface BrowsedFolder extends VersionShown {
  readonly entries: VersionEntry[];
}

/** What was read of a version's tree, and which version it was. */
export interface ReadVersion<T> extends VersionShown {
  readonly value: T;
}

/** What browsing needs of a version's tree: no leaf. */
type BrowsedTree = Pick<BrowsableTree, 'manifest' | 'nodes'>;

export class VersionBrowser {
  constructor(private readonly parts: EngineParts) {}

  /** This computer's name in source labels (computer-name.ts). */
  computer(): string {
    return this.parts.computer();
  }

  /**
   * A folder of a version, from the local metadata cache when it holds the version. When the
   * service cannot be reached, the bucket's active version as last seen is shown from the cache
   * (`offlineSince` says when it was seen, `offlineBecause` why the service did not answer); a
   * named version in the cache needs no service.
   */
  async browse(input: BrowseRequest): Promise<BrowsedFolder> {
    const paths = PathsInVersions.of(this, input);
    const { onProgress } = input;
    const { value, ...shown } = await this.reading(input, async (open) => {
      const { path } = await paths.in(open.manifest['source_label']);
      const onListed = onProgress ? listingPhase(onProgress, () => this.parts.now()) : undefined;
      return listVersionPath(open, path ?? '', input.recursive === true, onListed);
    });
    return { ...shown, entries: value };
  }

  /**
   * What `read` makes of the tree of the version `input` names (the bucket's active one by
   * default), found as `browse` finds it: from the local metadata cache when it holds the
   * version, else from the service, else, when the service cannot be reached, the active
   * version as last seen.
   */
  async reading<T>(
    input: VersionRequest,
    read: (tree: BrowsedTree) => T | Promise<T>,
  ): Promise<ReadVersion<T>> {
    refuseVersionAndSnapshot(input);
    const online = { offlineSince: null, offlineBecause: null };
    /** The version named, when its kept copy was found damaged and is to be pulled again. */
    let damaged: { readonly versionId: string; readonly error: EngineError } | undefined;
    if (input.version !== undefined) {
      const versionId = this.lastSeenIdOf(input.bucket, input.version);
      const cached = this.knownAsThisBucketsOrNone(input.bucket, versionId)
        ? await this.parts.metadata.cachedTree(versionId, openBrowsableTree)
        : undefined;
      if (cached) {
        try {
          return { versionId, ...online, value: await this.read(versionId, cached, read) };
        } catch (error) {
          // A node of the kept copy no longer matches its CID: read() forgot the copy, and the
          // version is pulled again below, as one not kept, rather than fail this time too.
          if (!isEngineError(error, 'protocol')) throw error;
          damaged = { versionId, error };
        }
      }
    }
    try {
      // One attempt, no backoff: browsing falls back to the cache instead of waiting.
      const { client } = await this.parts.connection.connect({ retry: NO_RETRY });
      const { versionId } = await this.parts.versions.resolve(client, input);
      const { onProgress } = input;
      const onPull = (): PullProgress | undefined =>
        onProgress ? pullPhase(onProgress, () => this.parts.now()) : undefined;
      let value: T;
      try {
        value = await this.read(
          versionId,
          await this.parts.metadata.versionTree(client, versionId, openBrowsableTree, onPull()),
          read,
        );
      } catch (error) {
        if (!isEngineError(error, 'protocol')) throw error;
        const pulled = await this.parts.metadata.pulledTree(
          client,
          versionId,
          openBrowsableTree,
          true,
          onPull(),
        );
        value = await this.read(versionId, pulled, read);
      }
      return { versionId, ...online, value };
    } catch (error) {
      const unreachable = error instanceof EngineError && UNREACHABLE.has(error.code);
      if (unreachable && damaged)
        throw unreachableWithDamagedCopy(damaged.versionId, damaged.error, error);
      const known = lastKnownActiveVersion(this.parts.db, input.bucket);
      const cached =
        unreachable && input.version === undefined && input.snapshot === undefined && known
          ? await this.parts.metadata.cachedTree(known.version_id, openBrowsableTree)
          : undefined;
      if (!cached || !known || !(error instanceof EngineError)) {
        cached?.close();
        throw error;
      }
      try {
        return {
          versionId: known.version_id,
          offlineSince: known.seen_at,
          offlineBecause: error.code,
          value: await this.read(known.version_id, cached, read),
        };
      } catch (readError) {
        if (!isEngineError(readError, 'protocol')) throw readError;
        throw unreachableWithDamagedCopy(known.version_id, readError, error);
      }
    }
  }

  /**
   * The id of the version `typed` names among the bucket's versions as last listed, where it
   * may be the start of one (named-by-id.ts), so that this works while the service cannot be
   * reached; else `typed` as it is.
   */
  private lastSeenIdOf(bucket: string, typed: string): string {
    const known = lastKnownVersions(this.parts.db, bucket);
    const versions = known ? (JSON.parse(known.versions_json) as Metadata[]) : [];
    return namedById(versions, typed, `versions of bucket "${bucket}"`)?.id ?? typed;
  }

  /**
   * Whether the cache may show `versionId` as a version of bucket `bucket`: this device's
   * records name it among that bucket's versions, or among no bucket's (a version made before
   * the bucket's versions were last listed). One they name among another bucket's only is
   * refused: the cache holds versions of every bucket, and would otherwise show another
   * bucket's tree under this one's name. A bucket this device has no record of is asked of the
   * service.
   */
  private knownAsThisBucketsOrNone(bucket: string, versionId: string): boolean {
    const named = bucketIdsNamed(this.parts.db, bucket);
    if (named.length === 0) return false;
    const holders = bucketsKnownToHoldVersion(this.parts.db, versionId);
    if (holders.length === 0 || holders.some((holder) => named.includes(holder.id))) return true;
    throw new EngineError(
      'not_found',
      `bucket "${bucket}" has no version ${versionId} (it is a version of bucket "${holders[0]?.name ?? ''}")`,
    );
  }

  /** What `read` makes of `tree`, which is closed after. */
  private async read<T>(
    versionId: string,
    tree: BrowsableTree,
    read: (tree: BrowsedTree) => T | Promise<T>,
  ): Promise<T> {
    try {
      return await usingTree(tree, (open) => Promise.resolve(read(open)));
    } catch (error) {
      // A node that no longer matches its CID: the CAR was damaged on this disk after it was
      // cached (its index spared reading it whole). It goes, so the version is pulled again.
      if (isEngineError(error, 'protocol')) await this.parts.metadata.forget(versionId);
      throw error;
    }
  }
}
