import { isEngineError } from '../api/index.ts';
import {
  checkSourceFolder,
  excludingFolders,
  knownPathOf,
  loadExcludeRules,
  walkSource,
  type EntryStats,
  type SkippedItem,
} from '../scanner/index.ts';
import {
  bucketIdsNamed,
  indexedSourceDirs,
  lastKnownActiveVersion,
  RestoredFiles,
  sourceDirIndexing,
  sourceFileIndex,
  type KnownActiveVersion,
  type SourceFileIndex,
} from '../state/index.ts';
import { MetadataFloor } from '../packer/index.ts';
import { DEFAULT_LIMITS } from '../protocol/index.ts';
import {
  openBrowsableTree,
  otherSourceRefusal,
  sourceTooLargeReason,
  surveySource,
  type OtherVouchers,
} from '../uploader/index.ts';
import { measureExcluded, type ExcludedItem, type FoundExcluded } from './excluded-items.ts';
import { formerExcludesForPlan } from './former-excludes.ts';
import { keptExcludesOf } from './source-exclude-rules.ts';
import type { EngineParts } from './engine-parts.ts';
import { absolutePath } from './absolute-path.ts';

// `canopy backup --dry-run`: what a backup of a folder would include, what its rules would
// leave out, what it would read, and whether it would be refused, from what this device knows
// (the bucket as last seen, the folder's file index, the cached metadata): no network.

/** A dry run of a backup. */
export interface PlanRequest {
  readonly dir: string;
  /** The bucket it would go into; with `replaceSource`, the rules of its former folder apply. */
  readonly bucket?: string;
  readonly replaceSource?: boolean;
}

/** What a backup of a folder would include, and what it would pass over. */
export interface BackupPlan {
  files: number;
  bytes: number;
  /** What the rules leave out, in the walk's order. */
  excluded: ExcludedItem[];
  skipped: SkippedItem[];
  /** The folder whose kept rules would apply (BackupResult.excludesFrom); null for none. */
  excludesFrom: string | null;
  /**
   * The files the backup would read, and their bytes: those new or changed since the folder's
   * last backup here into the bucket (or, renamed or moved, under its former name). Null
   * without a bucket, before a backup into it here, or when the backup would be refused.
   */
  toRead: { files: number; bytes: number } | null;
  /**
   * Why the backup would be refused (the bucket holds backups of another folder, or the folder
   * too many files for one version), as the backup would say it; null when it would not be, or
   * this device cannot tell.
   */
  refusedBecause: string | null;
  /**
   * Whether this device knows a bucket of the name given, as it last listed them (a typo shows
   * here, before the backup itself says so); null without a bucket.
   */
  bucketKnown: boolean | null;
}

/** The index a backup would take files from without reading them, and what else vouches. */
interface PlanIndex {
  readonly index: SourceFileIndex;
  readonly others: OtherVouchers;
}

export async function planBackup(
  parts: EngineParts,
  input: PlanRequest,
  /** Canopy's own folders, which no backup reads. */
  ownFolders: readonly string[],
): Promise<BackupPlan> {
  const { db } = parts;
  const sourceDir = absolutePath(input.dir);
  checkSourceFolder(sourceDir);
  const kept = keptExcludesOf(db, sourceDir);
  const former =
    kept.length === 0 && input.bucket !== undefined && input.replaceSource === true
      ? formerExcludesForPlan(db, input.bucket, sourceDir)
      : undefined;
  const rules = excludingFolders(
    await loadExcludeRules(sourceDir, former?.rules ?? kept),
    sourceDir,
    [...ownFolders],
  );
  const active = input.bucket === undefined ? undefined : lastKnownActiveVersion(db, input.bucket);
  const refusal =
    active &&
    otherSourceRefusal(
      await activeSourceLabel(parts, active),
      `${parts.computer()}:${knownPathOf(sourceDir, indexedSourceDirs(db, active.bucket_id))}`,
      input.replaceSource === true,
    );
  const plan: BackupPlan = {
    files: 0,
    bytes: 0,
    excluded: [],
    skipped: [],
    excludesFrom: former?.dir ?? null,
    toRead: null,
    refusedBecause: refusal ? refusal.message : null,
    bucketKnown: input.bucket === undefined ? null : bucketIdsNamed(db, input.bucket).length > 0,
  };
  const excluded: FoundExcluded[] = [];
  const passedOver = {
    onSkip: (item: SkippedItem) => plan.skipped.push(item),
    onExcluded: (relativePath: string, stats: EntryStats) => {
      const by = rules.excludedBy(relativePath, stats.type === 'directory');
      // The walk excluded it by these very rules.
      if (by === undefined) throw new Error(`no rule excludes ${relativePath}`);
      excluded.push({ path: relativePath, stats, by });
    },
  };
  const indexed =
    input.bucket === undefined || refusal
      ? undefined
      : indexForPlan(parts, input.bucket, sourceDir);
  /** The least metadata the tree makes: more than a version holds, and it is refused. */
  let metadataFloorBytes: number;
  const metadataLimitBytes = parts.deps.metadataLimitBytes ?? DEFAULT_LIMITS.metadataCarBytes;
  if (indexed) {
    // The walk the backup makes: what it finds as its last backup here left it, it takes
    // without reading.
    const survey = await surveySource(sourceDir, rules, indexed.index, {
      others: indexed.others,
      passedOver,
      // The plan counts all there is, refused or not.
      metadataLimit: { bytes: metadataLimitBytes, stop: false },
    });
    plan.files = survey.files;
    plan.bytes = survey.bytes;
    plan.toRead = { files: survey.filesToRead, bytes: survey.bytesToRead };
    metadataFloorBytes = survey.metadataFloorBytes;
  } else {
    const floor = new MetadataFloor(metadataLimitBytes);
    for await (const entry of walkSource(sourceDir, { rules, ...passedOver })) {
      floor.add(entry);
      if (entry.kind !== 'file') continue;
      plan.files += 1;
      plan.bytes += entry.size;
    }
    metadataFloorBytes = floor.finish();
  }
  if (plan.refusedBecause === null && metadataFloorBytes > metadataLimitBytes) {
    plan.refusedBecause = sourceTooLargeReason(sourceDir, metadataLimitBytes);
    plan.toRead = null;
  }
  // Measured after the walk, one at a time: a walk of the folder inside the walk would run
  // two at once.
  for (const item of excluded) plan.excluded.push(await measureExcluded(sourceDir, item));
  return plan;
}

/**
 * The folder the bucket's active version, as last seen, was backed up from (its manifest's
 * `source_label`, as the backup checks it): from this device's copy of its metadata, or else
 * from the folder whose file index here describes it. Undefined when this device cannot tell
 * (another computer's version, never browsed here).
 */
async function activeSourceLabel(parts: EngineParts, active: KnownActiveVersion): Promise<unknown> {
  try {
    const tree = await parts.metadata.cachedTree(active.version_id, openBrowsableTree);
    if (tree)
      try {
        return tree.manifest['source_label'];
      } finally {
        tree.close();
      }
  } catch (error) {
    // Damaged on the disk: the next browse of it pulls it again.
    if (!isEngineError(error, 'protocol')) throw error;
  }
  const dir = sourceDirIndexing(parts.db, active.bucket_id, active.version_id);
  return dir === undefined ? undefined : `${parts.computer()}:${dir}`;
}

/**
 * The file index of `sourceDir`'s last backup here into the bucket named `bucketName`, as this
 * device last knew that name, and the restored files noted for it: what a backup takes files
 * from without reading them. A folder never backed up into it here that is the folder of its
 * active version renamed or moved has an empty index, and that version's index vouches for
 * its files, as in the backup (backup-source.ts). Undefined when no backup of the folder, by
 * either name, into the bucket was made here.
 */
function indexForPlan(
  parts: EngineParts,
  bucketName: string,
  sourceDir: string,
): PlanIndex | undefined {
  const { db } = parts;
  for (const bucketId of bucketIdsNamed(db, bucketName)) {
    const dir = knownPathOf(sourceDir, indexedSourceDirs(db, bucketId));
    const index = sourceFileIndex(db, bucketId, dir);
    if (index.versionId !== null)
      return { index, others: { restored: RestoredFiles.of(db, bucketId, dir) } };
  }
  const active = lastKnownActiveVersion(db, bucketName);
  if (!active) return undefined;
  const formerDir = sourceDirIndexing(db, active.bucket_id, active.version_id);
  const dir = knownPathOf(sourceDir, indexedSourceDirs(db, active.bucket_id));
  if (formerDir === undefined || formerDir === dir) return undefined;
  return {
    index: sourceFileIndex(db, active.bucket_id, dir),
    others: {
      restored: RestoredFiles.of(db, active.bucket_id, dir),
      former: sourceFileIndex(db, active.bucket_id, formerDir),
    },
  };
}
