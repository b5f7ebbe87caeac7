import type { SkippedItem } from '../scanner/index.ts';
import type { ServiceClient } from '../service/index.ts';
import type { RestoredFiles, SourceFileIndex, UploadQueue } from '../state/index.ts';
import type { TreeLeaves, TreeNodes } from './previous-tree.ts';
import type { BackupProgress } from './progress-meter.ts';

// What a backup of a source folder into a bucket is given, and what it gives back
// (backup-source.ts).

export interface BackupInput {
  readonly client: ServiceClient;
  readonly bucketId: string;
  readonly sourceDir: string;
  readonly sourceLabel: string;
  readonly deviceFingerprint: string;
  readonly stagingRoot: string;
  readonly now: () => number;
  /** Shards are at most this large (CAR bytes); by default MAX_SHARD_TARGET_BYTES. */
  readonly shardTargetBytes?: number;
  /**
   * How fast the upload is expected to go: the speed measured for the bucket (or, before its
   * first timed upload, for another bucket of the account), or the user's limit where that is
   * lower; undefined when neither is known. Weighs sending data the host holds
   * already against reading its shard again without it (held-blocks.ts).
   */
  readonly expectedUploadBytesPerSecond?: number;
  /** The largest metadata CAR a version may have; by default the spec's (§14, 128 MiB). */
  readonly metadataLimitBytes?: number;
  /** Canopy's own folders (its home, the embedded service's data): never backed up. */
  readonly ownFolders?: readonly string[];
  /** Replace a bucket whose versions come from another source (§17.1). */
  readonly replaceSource?: boolean;
  /** Where pushed versions and confirmed shards are recorded, so a killed run resumes. */
  readonly queue: UploadQueue;
  /** Exclude rules the user keeps for this source, after the defaults and before its file. */
  readonly excludes?: readonly string[];
  /** What each file looked like at the last backup of this source to this bucket. */
  readonly fileIndex: SourceFileIndex;
  /**
   * Files restores wrote into this source since, new to the index: each still as a restore
   * left it is not read, as if the index held it. Undefined when there are none.
   */
  readonly restoredFiles?: RestoredFiles;
  /**
   * The file index kept here of another folder of this bucket that describes version
   * `versionId`, if one does: the folder of the active version, which a folder with no index
   * of its own may be, renamed or moved.
   */
  readonly formerIndexOf?: (versionId: string) => SourceFileIndex | undefined;
  /**
   * The exclude rules kept here for that other folder, when it has any: a folder renamed or
   * moved keeps its rules, unless it has rules of its own (`excludes`).
   */
  readonly formerExcludesOf?: (versionId: string) => FormerExcludes | undefined;
  /**
   * Keeps `rules`, taken from the former folder, for this source from now on: called once the
   * backup has made this folder the bucket's source, before anything is stored.
   */
  readonly keepExcludes?: (rules: readonly string[]) => void;
  /**
   * Blocks, by CID text, that a restore or a verify found the host could not give back whole:
   * each the source still has is read and sent again, even though the host counts it held.
   */
  readonly resendLeaves?: ReadonlySet<string>;
  /**
   * A version whose metadata a verify found damaged on the server: while it is the bucket's
   * active version, a new version of the tree is stored even when nothing changed.
   */
  readonly storeAgainVersion?: string;
  /** Test seam: runs after a file was read, before it is checked for changes. */
  readonly afterFileRead?: (relativePath: string) => Promise<void>;
  /**
   * A version's tree, from the local metadata cache or pulled into it. Its nodes are wanted
   * when the file index does not list its files' leaves, or when folders may be reused.
   */
  readonly loadTree: (versionId: string, withNodes: boolean) => Promise<TreeLeaves>;
  /**
   * The times the tree of root `rootCid` gives its entries, by path, from its nodes: for a
   * backup whose file index does not describe the version it builds on, which then keeps the
   * version's time for an entry a restore of it set (main/restore/times-in-tree.ts).
   */
  readonly timesInTree?: (
    rootCid: string,
    nodes: TreeNodes,
  ) => (relativePath: string) => bigint | undefined;
  /**
   * Called with the file that holds a stored version's metadata CAR, for the local cache that
   * browsing reads: the callee may move the file away; whatever is left there is removed.
   */
  readonly keepMetadata?: (versionId: string, carFile: string) => Promise<void>;
  /** Progress in files and bytes with an ETA, a few times a second at most. */
  readonly onProgress?: (progress: BackupProgress) => void;
  /**
   * Stops the backup with `stopped`: packing between two entries, the upload between two
   * shards. The client given is stopped by the same signal, which cuts off its requests.
   */
  readonly signal?: AbortSignal;
  /** Test seam: called once the upload is queued (0), then after each confirmed shard. */
  readonly afterShardConfirmed?: (confirmedSoFar: number) => void;
  /**
   * Called once an upload stops, however it stops, with how long its shards of at least
   * TIMED_SHARD_MIN_BYTES took, when there were any: what the next backup sizes its shards by.
   */
  readonly onShardsTimed?: (sample: { readonly bytes: number; readonly ms: number }) => void;
  /**
   * Called when a backup whose shards the host refused as too large has completed with smaller
   * ones, with the shard target that passed: where the next backup should start.
   */
  readonly onShardLimit?: (maxBytes: number) => void;
  /** Counts the metadata CAR bytes pushed (metadata-push.ts); backupSource sets it. */
  readonly metadataSent?: { bytes: number };
}

export interface BackupResult {
  readonly versionId: string;
  readonly files: number;
  readonly bytesScanned: number;
  /** Bytes read from disk: files the index shows unchanged are not read. */
  readonly bytesRead: number;
  readonly filesUnchanged: number;
  readonly newBytes: number;
  /**
   * Of `newBytes`, those the server held already for the user (the same data in another bucket,
   * or in a version this one does not build on): left out of the upload (§11.3), save where
   * sending them costs less time than making their shard again (held-blocks.ts).
   */
  readonly heldBytes: number;
  /** Bytes of data (shards) sent, this run's and an interrupted run's it finished. */
  readonly bytesUploaded: number;
  /**
   * Bytes of metadata CARs this run pushed: each version's CAR holds its whole tree, so even a
   * version with one changed file sends it all (metadata-push.ts).
   */
  readonly metadataBytesUploaded: number;
  readonly durationMs: number;
  readonly skipped: readonly SkippedItem[];
  /** Files that changed while read, twice: stored as read, possibly mixing old and new bytes. */
  readonly changedWhileRead: readonly string[];
  /**
   * Nothing changed since the active version: no version was made, and `versionId` is that
   * active version. Seen from the file index without packing, or, when the index cannot vouch
   * for the source, by packing it to the active version's very tree.
   */
  readonly unchanged: boolean;
  /** An interrupted upload of an earlier run that this run finished first. */
  readonly resumedVersionId: string | null;
  /** How many of `resendLeaves` the source still had, and were sent again. */
  readonly blocksResent: number;
  /** Whether a new version took the place of `storeAgainVersion`, with whole metadata. */
  readonly metadataStoredAgain: boolean;
  /**
   * The folder whose kept exclude rules this backup applied and kept for this one: the
   * bucket's source before this folder took its place (renamed or moved); null otherwise.
   */
  readonly excludesFrom: string | null;
}

/** The exclude rules kept for the folder a bucket was backed up from before. */
export interface FormerExcludes {
  /** That folder, as its path was kept. */
  readonly dir: string;
  readonly rules: readonly string[];
}
