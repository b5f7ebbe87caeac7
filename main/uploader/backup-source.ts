import { existsSync, openAsBlob } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { EngineError, isEngineError, throwIfStopped } from '../api/index.ts';
import { CID } from 'multiformats/cid';
import {
  cidText,
  DAG_PB_CODEC,
  DEFAULT_LIMITS,
  type MetadataUploadResult,
} from '../protocol/index.ts';
import { LeafSizes, packSource, type PackInput } from '../packer/index.ts';
import { ChunkHasher } from '../packer/chunk-hasher.ts';
import {
  excludingFolders,
  loadExcludeRules,
  type ExcludeRules,
  type SkippedItem,
} from '../scanner/index.ts';
import { isServiceRefusal, type ServiceClient } from '../service/index.ts';
import type {
  QueuedShard,
  QueuedUpload,
  ShardPlan,
  ShardToQueue,
  SourceFileIndex,
  StagedEntries,
  UntrustedEntries,
  UploadQueue,
} from '../state/index.ts';
import {
  isDamagedMetadata,
  leavesOfFile,
  listedLeavesInTree,
  readTreeLeavesOfFile,
  type TreeLeaves,
} from './previous-tree.ts';
import { GarbageAtPhaseSwitch } from './garbage-at-phase-switch.ts';
import { MetadataCarFile, MetadataOverLimit } from './metadata-car-file.ts';
import { plannedShardBody, type PlannedBlockPages } from './planned-shard-body.ts';
import { ShardPlanner, type PlannedShard } from './shard-planner.ts';
import { ShardRefused, targetAfterRefusal } from './shard-refusal.ts';
import {
  isUploadWindowOver,
  uploadWindowOver,
  windowState,
  WindowEnding,
  WindowOver,
} from './upload-window.ts';
import { MAX_SHARD_TARGET_BYTES, TIMED_SHARD_MIN_BYTES } from './shard-target.ts';
import { ShardWriter, type StagedShard } from './shard-writer.ts';
import type { LeafShards } from './leaf-shards.ts';
import { PhaseProgress, ScanProgress, type BackupProgress } from './progress-meter.ts';
import { newStagingDir, removeAbandonedStaging } from './staging-dirs.ts';
import { sourceTooLarge } from './source-too-large.ts';
import { sameEntry, surveySource, vouchingEntry } from './unchanged-source.ts';
import { nodeIndexFileOf } from './tree-node-index.ts';
import { askMissing, type PushedUpload } from './ask-missing.ts';
import { pushWithinQuota } from './quota-probe.ts';

// One backup of a source folder into a bucket (§17.4): pack, lay out only leaves the previous
// version lacks into shards, push, ask which of those the user already holds, upload the shards
// that carry the rest, complete. A stale previous_id (another device stored first) rebuilds on
// the new active version once.
//
// Shards are planned, not written: the upload reads each block again from its source file and
// checks it against its CID. A file that changed in between (`source_changed`) drops the
// pending version, and the backup runs again with its shards staged on disk, a snapshot that
// later changes cannot touch. Files that changed while they were read are packed a second
// time; that pass stages its shards too.

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
}

export interface BackupResult {
  readonly versionId: string;
  readonly files: number;
  readonly bytesScanned: number;
  /** Bytes read from disk: files the index shows unchanged are not read. */
  readonly bytesRead: number;
  readonly filesUnchanged: number;
  readonly newBytes: number;
  readonly bytesUploaded: number;
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
}

const MAX_DELETED_IN_REQUEST = 1500; // keeps request-data well under 128 KiB (§11.6 allows a subset)

/**
 * A file modified this close to the scan may change again within the same mtime tick, unseen
 * by a later stat; it is read next time rather than trusted from the index.
 */
const RACY_MTIME_NS = 2_000_000_000n;

/**
 * Reuse a file's leaves when the index shows it unchanged and the active version holds them:
 * the leaves its index entry lists, or, in an index from before entries listed them, those of
 * its File node in the active version's tree. A file holding a leaf to send again is read.
 */
function reuseUnchanged(
  index: SourceFileIndex,
  previous: TreeLeaves | undefined,
  resend: ReadonlySet<string>,
  /** Takes the size of each file read only to send a leaf again: the survey counted it unread. */
  onReadToResend: (bytes: number) => void,
): PackInput['reuse'] {
  if (!previous) return undefined;
  return (file) => {
    const known = vouchingEntry(index, file, index.lookup(file.path));
    if (!known) return undefined;
    const leaves = known.leaves
      ? listedLeavesInTree(previous, known.leaves, file.size)
      : leavesOfFile(previous, known.cid, file.size);
    if (resend.size > 0 && leaves?.some((leaf) => resend.has(cidText(leaf.cid))) === true) {
      onReadToResend(file.size);
      return undefined;
    }
    return leaves;
  };
}

/**
 * Reuse a folder the survey did not find changed, when the walk finds it again as the index
 * describes it (it may have changed since the survey), the index has its node, and the active
 * version's tree holds that node: the index describes that version.
 */
function reuseUnchangedFolders(
  index: SourceFileIndex,
  previous: TreeLeaves | undefined,
  changedFolders: ReadonlySet<string> | null,
): Pick<PackInput, 'reuseFolder' | 'previousNodes'> | undefined {
  const nodes = previous?.nodes;
  if (!nodes || !changedFolders) return undefined;
  return {
    previousNodes: nodes,
    reuseFolder: (folder) => {
      if (changedFolders.has(folder.path)) return undefined;
      const known = index.lookup(folder.path);
      if (!known || !sameEntry(folder, known) || known.cid === null || known.nodeSize === null)
        return undefined;
      const cid = CID.parse(known.cid);
      if (cid.code !== DAG_PB_CODEC || !nodes.has(cid)) return undefined;
      return {
        cid,
        size: known.nodeSize,
        ...index.filesUnder(folder.path),
        hasEntries: index.entriesIn(folder.path) > 0,
      };
    },
  };
}

/**
 * The entries the next backup must not trust: torn files, and files modified right before the
 * scan. Folders and symlinks may be fresh: a symlink cannot change in place (replacing it makes
 * a new inode), and a change to a folder's entries shows in the entries.
 */
function untrustedOf(changedWhileRead: readonly string[], scanStartedMs: number): UntrustedEntries {
  return {
    paths: changedWhileRead,
    filesModifiedFromNs: BigInt(scanStartedMs) * 1_000_000n - RACY_MTIME_NS,
  };
}

/**
 * Where the upload takes shard bytes from: the source files again (`planned`), or shard files
 * written while packing (`staged`).
 */
type ShardSource = 'planned' | 'staged';

/** Whether the upload of `versionId` is queued still, for a later run to finish. */
function stillQueued(input: BackupInput, versionId: string): boolean {
  return versionId !== '' && input.queue.pendingFor(input.bucketId)?.version_id === versionId;
}

/** Removes a pushed metadata CAR's file, and the index of its nodes. */
async function removeMetadataFile(file: string | null): Promise<void> {
  if (file === null) return;
  await rm(file, { force: true });
  await rm(nodeIndexFileOf(file), { force: true });
}

/** Removes a staging folder; planned shards have none (''). */
async function removeStaging(dir: string): Promise<void> {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
}

async function attempt(
  input: BackupInput,
  started: number,
  firstShardSource: ShardSource,
  /** Called once the new version's upload is queued, and holds what the host has of it. */
  onUploadQueued: () => Promise<void>,
): Promise<BackupResult> {
  const { client } = input;
  const rules = excludingFolders(
    await loadExcludeRules(input.sourceDir, input.excludes),
    input.sourceDir,
    input.ownFolders ?? [],
  );
  const active = (await client.listVersions(input.bucketId)).find(
    (version) => version.state === 'active',
  );
  const indexIsActive = active !== undefined && input.fileIndex.versionId === active.id;
  // Blocks to send again are found only by reading the files that hold them: nothing is taken
  // as unchanged from the index, neither the source nor a folder.
  const resend = input.resendLeaves ?? new Set<string>();
  // A version is made even of an unchanged source, to take the place of one whose metadata
  // the server holds damaged.
  let storeAgain = active !== undefined && active.id === input.storeAgainVersion;
  // With progress to report, the walk that looks for changes also counts what to read.
  const scanning = input.onProgress ? new ScanProgress(input.onProgress, input.now) : undefined;
  const survey =
    indexIsActive || scanning
      ? await surveySource(input.sourceDir, rules, input.fileIndex, (bytes) =>
          scanning?.found(bytes),
        )
      : undefined;
  scanning?.finish();
  if (indexIsActive && survey?.unchanged === true && resend.size === 0 && !storeAgain) {
    return {
      versionId: active.id,
      files: survey.files,
      bytesScanned: survey.bytes,
      bytesRead: 0,
      filesUnchanged: survey.files,
      newBytes: 0,
      bytesUploaded: 0,
      durationMs: input.now() - started,
      skipped: [],
      changedWhileRead: [],
      unchanged: true,
      resumedVersionId: null,
      blocksResent: 0,
      metadataStoredAgain: false,
    };
  }
  const { loadTree } = input;
  // Folders found unchanged reuse the active version's nodes, when the index describes it.
  const changedFolders =
    indexIsActive && resend.size === 0 ? (survey?.changedFolders ?? null) : null;
  /**
   * The active version's tree; one of no leaf when its metadata is damaged on the server and
   * this device keeps no copy: every file is read, the host says which of its blocks it lacks,
   * and a version is stored in its place even when nothing changed.
   */
  const previousTree = async (id: string): Promise<TreeLeaves> => {
    try {
      return await loadTree(id, !input.fileIndex.leavesRecorded || changedFolders !== null);
    } catch (error) {
      if (!isDamagedMetadata(error)) throw error;
      storeAgain = true;
      return { manifest: {}, leaves: new LeafSizes() };
    }
  };
  const previous = active
    ? { id: active.id, rootCid: active.root_cid, tree: await previousTree(active.id) }
    : null;
  const label = previous?.tree.manifest['source_label'];
  if (
    previous &&
    typeof label === 'string' &&
    label !== input.sourceLabel &&
    input.replaceSource !== true
  ) {
    throw new EngineError(
      'other_source',
      `this bucket holds backups of ${label}, not of ${input.sourceLabel}: choose another bucket, or add --replace-source to make this folder its source from now on (the versions of ${label} stay restorable)`,
    );
  }
  // Reading's totals: the files packing must read; with no previous version, every file.
  const readingTotals = survey
    ? { files: survey.files, bytes: previous ? survey.bytesToRead : survey.bytes }
    : undefined;
  const garbage = new GarbageAtPhaseSwitch();
  const staged = input.fileIndex.stage();
  let pushed: PushedVersion | undefined;
  /**
   * The pushed version, or the one it went on as when its upload window neared its end; ''
   * before the push.
   */
  let versionId = '';
  let uploaded = 0;
  try {
    try {
      pushed = await packAndPush(
        input,
        previous,
        rules,
        firstShardSource,
        readingTotals,
        garbage,
        staged,
        changedFolders,
        resend,
        storeAgain,
      );
      versionId = pushed.versionId;
      // What packing held is garbage now, before the upload makes its own.
      garbage.collectForUpload();
      for (let upload = pushed.upload; upload !== null;) {
        const current: QueuedUpload = upload;
        await onUploadQueued();
        try {
          uploaded += await finishUpload(
            input,
            current,
            pushed.pushedAs !== null && current.source_dir !== null,
          );
          upload = null;
        } catch (error) {
          if (!(error instanceof WindowEnding)) throw error;
          uploaded += error.sentBytes;
          const next = await carryOver(input, current, error, pushed, previous?.tree.leaves);
          if (!next) throw error;
          staged.reseal(next.version_id);
          versionId = next.version_id;
          upload = next;
        }
      }
      if (pushed.metadataFile !== null) await input.keepMetadata?.(versionId, pushed.metadataFile);
    } finally {
      garbage.end();
      // Kept in the cache by now, or gone with the version; one whose upload is still queued
      // stays for the run that resumes it.
      if (pushed?.metadataFile && !stillQueued(input, versionId))
        await removeMetadataFile(pushed.metadataFile);
    }
    // Commit drops the stage with it.
    staged.commit(versionId, untrustedOf(pushed.changedWhileRead, pushed.scanStartedMs));
  } catch (error) {
    try {
      // An upload still queued (a dead network, a full disk) is finished by the next run,
      // which adopts its sealed stage.
      if (!stillQueued(input, versionId)) staged.discard();
    } catch {
      // The backup's own failure is what the user must see; a full disk fails this delete as
      // well. A stage left here is only rows, and the next stage of this source drops it.
    }
    throw error;
  }
  return {
    versionId,
    files: pushed.files,
    bytesScanned: pushed.bytesScanned,
    bytesRead: pushed.bytesRead,
    filesUnchanged: pushed.filesUnchanged,
    newBytes: pushed.newBytes,
    bytesUploaded: uploaded,
    durationMs: input.now() - started,
    skipped: pushed.skipped,
    changedWhileRead: pushed.changedWhileRead,
    unchanged: pushed.sameAsPrevious,
    resumedVersionId: null,
    blocksResent: pushed.blocksResent,
    metadataStoredAgain: storeAgain && !pushed.sameAsPrevious,
  };
}

/** The bucket's active version, which a backup builds on. */
interface PreviousVersion {
  readonly id: string;
  readonly rootCid: string;
  readonly tree: TreeLeaves;
}

/** The fields a version was pushed with, but its metadata CAR, which is in its file. */
interface PushedAs {
  readonly rootCid: string;
  readonly metadataCid: string;
  readonly expectedDataSize: number;
  readonly previousId: string | null;
  readonly deletedBlockCids: readonly string[];
}

/** A version packed and pushed: what the rest of the backup needs, and nothing more. */
interface PushedVersion {
  readonly versionId: string;
  /** The file of the pushed version's metadata CAR; null when none was pushed (`sameAsPrevious`). */
  readonly metadataFile: string | null;
  /**
   * The source as packed is the previous version's tree exactly, so no version was pushed and
   * `versionId` is the previous one's.
   */
  readonly sameAsPrevious: boolean;
  /** The recorded upload of its shards; null when the version needs no data (active). */
  readonly upload: QueuedUpload | null;
  /** What the push said, to say it again as a new version (carryOver); null without upload. */
  readonly pushedAs: PushedAs | null;
  readonly changedWhileRead: readonly string[];
  readonly scanStartedMs: number;
  readonly files: number;
  readonly bytesScanned: number;
  readonly bytesRead: number;
  readonly filesUnchanged: number;
  readonly newBytes: number;
  readonly skipped: readonly SkippedItem[];
  /** Blocks to send again that the source still had: each is in a shard sent. */
  readonly blocksResent: number;
}

/**
 * Packs the source, pushes the version and records its shards in the upload queue. Its own
 * function so that what packing held (the tree's nodes and leaves, the shard plan, the host's
 * answers) is unreachable once it returns, while the shards upload: on 44 000 files that was
 * a third of the heap.
 */
async function packAndPush(
  input: BackupInput,
  previous: PreviousVersion | null,
  rules: ExcludeRules,
  firstShardSource: ShardSource,
  /** What the reading phase reports progress against; present when progress is wanted. */
  totals: { readonly files: number; readonly bytes: number } | undefined,
  garbage: GarbageAtPhaseSwitch,
  /** Takes the packed entries for the file index; cleared when the source is packed again. */
  staged: StagedEntries,
  /** Folders the survey found changed; every other is reused. Null: none is. */
  changedFolders: ReadonlySet<string> | null,
  /** Blocks to send again, by CID text (BackupInput.resendLeaves). */
  resend: ReadonlySet<string>,
  /** Push even a tree the previous version has (BackupInput.storeAgainVersion). */
  storeAgain: boolean,
): Promise<PushedVersion> {
  const { client } = input;
  const shardTarget = input.shardTargetBytes ?? MAX_SHARD_TARGET_BYTES;
  let shardSource = firstShardSource;
  let staging = '';
  /** Where planned shards' blocks are written; the queue takes it when it records the upload. */
  let plan: ShardPlan | undefined;
  const newShards = (): ShardWriter | ShardPlanner => {
    if (shardSource === 'planned') {
      plan = input.queue.startPlan(input.bucketId);
      return new ShardPlanner(shardTarget, plan);
    }
    staging = newStagingDir(input.stagingRoot);
    return new ShardWriter(staging, shardTarget);
  };
  let shards = newShards();
  let skipped: SkippedItem[] = [];
  let keepStaging = false;
  // Set by newMetadata, in packOnce: declared wide, or the checks below would think it null.
  let metadata = null as MetadataCarFile | null;
  /** A new file for the metadata CAR, named as staging folders are, so a killed run's goes. */
  const newMetadata = async (): Promise<MetadataCarFile> => {
    await metadata?.abandon();
    await mkdir(input.stagingRoot, { recursive: true, mode: 0o700 });
    metadata = await MetadataCarFile.create(
      newStagingDir(input.stagingRoot),
      input.metadataLimitBytes ?? DEFAULT_LIMITS.metadataCarBytes,
    );
    return metadata;
  };
  let returned = false;
  try {
    /** The reading phase's progress of the pass under way, if progress is wanted. */
    let passProgress: PhaseProgress<'reading'> | undefined;
    const reuse = reuseUnchanged(input.fileIndex, previous?.tree, resend, (bytes) =>
      passProgress?.addToTotal(bytes),
    );
    const reuseFolder = reuseUnchangedFolders(input.fileIndex, previous?.tree, changedFolders);
    // File mtimes are on the wall clock, whatever clock `now` is.
    let scanStartedMs = Date.now();
    const { onProgress } = input;
    const packOnce = async (): ReturnType<typeof packSource> => {
      scanStartedMs = Date.now();
      const progress =
        onProgress && totals
          ? new PhaseProgress('reading', totals.files, totals.bytes, onProgress, input.now)
          : undefined;
      passProgress = progress;
      const nodes = await newMetadata();
      const packed = await packSource({
        rules,
        nodes,
        ...(reuse ? { reuse } : {}),
        ...(reuseFolder
          ? {
              ...reuseFolder,
              onFolderReused: (folder, files) => {
                staged.keepUnder(folder.path);
                progress?.addFiles(files);
              },
            }
          : {}),
        ...(progress
          ? {
              onBytesRead: (count: number) => progress.addBytes(count),
              onFilePacked: () => progress.addFile(),
            }
          : {}),
        ...(input.afterFileRead ? { afterFileRead: input.afterFileRead } : {}),
        ...(input.signal ? { signal: input.signal } : {}),
        sourceDir: input.sourceDir,
        sourceLabel: input.sourceLabel,
        deviceFingerprint: input.deviceFingerprint,
        createdAtSeconds: Math.floor(input.now() / 1000),
        onSkip: (item) => skipped.push(item),
        onEntry: (entry) => staged.add(entry),
        ...(previous ? { knownLeaves: previous.tree.leaves } : {}),
        ...(resend.size > 0 ? { resendLeaves: { has: (cid) => resend.has(cidText(cid)) } } : {}),
        onLeaf: async (cid, bytes, origin, text, leaf) => {
          if (shards instanceof ShardWriter) await shards.add(cid, bytes, leaf);
          else shards.add(cid, bytes, origin, leaf, text);
        },
      });
      progress?.finish();
      return packed;
    };
    let tree = await packOnce();
    await shards.seal();
    if (tree.changedWhileRead.length > 0) {
      // Files changed while read may hold torn bytes: read the tree once more (§2 R15); what
      // changes again is reported, and the next backup picks up its settled content. Files that
      // change this often would not read back the same at upload time: stage this pass.
      await removeStaging(staging);
      dropPlan(plan);
      plan = undefined;
      shardSource = 'staged';
      shards = newShards();
      skipped = [];
      staged.clear();
      tree = await packOnce();
      await shards.seal();
    }
    const counts = {
      changedWhileRead: tree.changedWhileRead,
      scanStartedMs,
      files: tree.fileCount,
      bytesScanned: tree.totalBytes,
      bytesRead: tree.bytesRead,
      filesUnchanged: tree.filesReused,
      skipped,
    };
    /** The leaves to send again that the source still has, by their number in the tree. */
    const resent = [...resend]
      .map((text) => tree.leaves.indexOfText(text))
      .filter((leaf) => leaf >= 0);
    // The file index could not vouch for the source (after a resumed upload, or with the
    // index lost), yet nothing changed: a second version would only duplicate the first.
    if (
      previous &&
      resent.length === 0 &&
      !storeAgain &&
      tree.rootCid.toString() === previous.rootCid &&
      previous.tree.manifest['source_label'] === input.sourceLabel
    ) {
      return {
        ...counts,
        blocksResent: 0,
        versionId: previous.id,
        metadataFile: null,
        sameAsPrevious: true,
        upload: null,
        pushedAs: null,
        newBytes: 0,
      };
    }
    const expected = bytesInShards(tree.leaves, shards.leafShards);
    const deleted = tree.knownLeavesDropped(MAX_DELETED_IN_REQUEST).map(cidText);
    if (!metadata) throw new Error('packed without a metadata file');
    const metadataFile: string = metadata.file;
    await metadata.finish(tree.manifestCid, tree.manifestBytes);
    // Packing's garbage goes before pushing makes more, while its tree is still needed.
    garbage.collect();
    let pushedAs: PushedAs = {
      rootCid: tree.rootCid.toString(),
      metadataCid: tree.manifestCid.toString(),
      expectedDataSize: expected,
      previousId: previous?.id ?? null,
      deletedBlockCids: deleted,
    };
    const push = async (expectedDataSize: number): Promise<MetadataUploadResult> =>
      client
        .pushVersion({
          bucketId: input.bucketId,
          ...pushedAs,
          expectedDataSize,
          validKeys: [],
          car: await openAsBlob(metadataFile),
        })
        .catch((error: unknown) => {
          // The service's own 413 for a push is its limit on the metadata CAR (request-data is
          // kept well under its own): a service with a lower limit than the spec's. A proxy's
          // 413 is told as such.
          throw isServiceRefusal(error, 'payload_too_large')
            ? sourceTooLarge(input.sourceDir)
            : error;
        });
    // Noted before it is asked for: killed before the upload is recorded, the next backup
    // deletes what the service made of it (dropUnrecordedPushes).
    input.queue.notePush(input.bucketId, pushedAs.metadataCid, input.now());
    let pushed: MetadataUploadResult;
    try {
      pushed = await push(expected);
    } catch (error) {
      if (!isEngineError(error, 'quota_exceeded')) throw error;
      const within = await pushWithinQuota({
        client,
        queue: input.queue,
        bucketId: input.bucketId,
        now: input.now,
        push,
        leaves: tree.leaves,
        inShards: (leaf) => shards.leafShards.shardOf(leaf) !== undefined,
        expected,
        refused: error,
      });
      pushed = within.pushed;
      // A version carried over to a new one later expects no more than this one.
      pushedAs = { ...pushedAs, expectedDataSize: within.expectedDataSize };
    }
    let upload: QueuedUpload | null = null;
    if (pushed.state === 'pending') {
      const needed = await shardsNeeded(input, pushed, tree.leaves, shards.leafShards);
      // The host counts a block to send again held: its shard goes all the same.
      for (const leaf of resent) {
        const shard = shards.leafShards.shardOf(leaf);
        if (shard !== undefined) needed.add(shard);
      }
      upload = {
        version_id: pushed.id,
        bucket_id: input.bucketId,
        storage_host: pushed.storage_host,
        storage_authorization: pushed.storage_authorization,
        staging_dir: staging,
        source_dir: shardSource === 'planned' ? input.sourceDir : null,
        files: tree.fileCount,
        bytes_scanned: tree.totalBytes,
        new_bytes: expected,
        created_at: input.now(),
        metadata_file: metadataFile,
        pushed_as: JSON.stringify(pushedAs),
      };
      const sealed: ReadonlyArray<StagedShard | PlannedShard> = shards.shards;
      const queued: ShardToQueue[] = sealed.map((shard, number) => ({
        shardCid: shard.shardCid.toString(),
        file: 'file' in shard ? shard.file : '',
        bytes: shard.bytes,
        needed: needed.has(number),
      }));
      input.queue.record(upload, queued, plan);
      input.queue.forgetPush(input.bucketId, pushedAs.metadataCid);
      // Recorded, the plan is the queue's, and gone, and the staged shards are the queue's.
      plan = undefined;
      keepStaging = true;
      // Should this process die during the upload, the run that finishes it takes the stage
      // as the index, rather than reading every file again.
      staged.seal(pushed.id, untrustedOf(counts.changedWhileRead, scanStartedMs));
      input.afterShardConfirmed?.(0);
    } else {
      // Active at once: nothing of it waits.
      input.queue.forgetPush(input.bucketId, pushedAs.metadataCid);
    }
    returned = true;
    return {
      ...counts,
      versionId: pushed.id,
      metadataFile,
      sameAsPrevious: false,
      upload,
      pushedAs: upload ? pushedAs : null,
      newBytes: expected,
      blocksResent: resent.length,
    };
  } catch (error) {
    if (error instanceof MetadataOverLimit) throw sourceTooLarge(input.sourceDir, error.limitBytes);
    throw error;
  } finally {
    // Once its upload is queued, a staged shard outlives this run: a crash must not lose it.
    if (!keepStaging) await removeStaging(staging);
    // Once returned, the metadata file is the caller's to keep or remove.
    if (!returned) await metadata?.abandon();
    dropPlan(plan);
  }
}

/**
 * Drops a plan no upload took. One left behind is only rows, which the next plan for the
 * bucket drops: its failure (a full disk fails this delete too) must not hide the backup's own
 * outcome.
 */
function dropPlan(plan: ShardPlan | undefined): void {
  try {
    plan?.discard();
  } catch {
    // See above: the next backup to this bucket drops what is left.
  }
}

/** The bytes of the new leaves laid out in shards: what the version expects to receive. */
function bytesInShards(leaves: LeafSizes, leafShards: LeafShards): number {
  let bytes = 0;
  for (let leaf = 0; leaf < leaves.count; leaf++)
    if (leafShards.shardOf(leaf) !== undefined) bytes += leaves.sizeAt(leaf) ?? 0;
  return bytes;
}

/**
 * The numbers of the shards holding a leaf the host lacks. The leaves laid out in shards are
 * asked about in lists of 10 000 (§11.3), their CID text made for each list and dropped after.
 */
async function shardsNeeded(
  input: BackupInput,
  pushed: PushedUpload,
  leaves: LeafSizes,
  leafShards: LeafShards,
): Promise<Set<number>> {
  const needed = new Set<number>();
  await askMissing(
    input.client,
    pushed,
    leaves,
    (leaf) => leafShards.shardOf(leaf) !== undefined,
    (cid) => {
      const shard = leafShards.shardOf(leaves.indexOfText(cid));
      if (shard !== undefined) needed.add(shard);
    },
  );
  return needed;
}

/**
 * Shards sent at once. The host makes each shard durable before it confirms it (its pack file
 * fdatasynced, its blocks recorded), and one shard at a time left the link idle meanwhile: a
 * backup of 1.2 GiB to this machine's own service took about a tenth longer (7.9 s against
 * 7.1 s). A second shard on its way fills that wait; each goes over a connection of its own.
 */
const SHARDS_IN_FLIGHT = 2;

/**
 * Uploads the queued shards the host has not confirmed, then completes. Returns the bytes
 * sent. Each shard's confirmation is recorded as soon as it comes, so a rerun never resends
 * one; the shards still on their way when a run is killed are sent again.
 */
async function finishUpload(
  input: BackupInput,
  upload: QueuedUpload,
  /** Whether the caller can go on as a new version without packing anew (carryOver). */
  canCarryOver = false,
): Promise<number> {
  const { client, onProgress } = input;
  let sent = 0;
  let confirmed = 0;
  const shards = input.queue.shardsOf(upload.version_id);
  const due = shards.filter((shard) => shard.needed === 1 && shard.confirmed === 0);
  /** Shards of this upload a run before this one sent: they count for its window too. */
  const confirmedBefore = shards.filter((shard) => shard.confirmed === 1).length;
  const progress = onProgress
    ? new PhaseProgress(
        'uploading',
        upload.files,
        due.reduce((sum, shard) => sum + shard.bytes, 0),
        onProgress,
        input.now,
        upload.files, // every file is packed by now
      )
    : undefined;
  // Each shard's own time: what one shard took beside the others is what the next backup's
  // shards, sent the same way, will take.
  const timed = { bytes: 0, ms: 0 };
  const reportTimed = (): void => {
    if (timed.bytes > 0) input.onShardsTimed?.(timed);
  };
  // Started at the first large block. One slot for each shard on its way, and as many again
  // for retries, whose cancelled bodies may still be reading; a body without one reads here.
  let hasher: ChunkHasher | undefined;
  const largeBlockHasher = (): ChunkHasher => (hasher ??= new ChunkHasher(2 * SHARDS_IN_FLIGHT));
  let slowestShardMs = 0;
  const sendShard = async (shard: QueuedShard): Promise<void> => {
    const started = performance.now();
    let sentThisShard = 0;
    const onSent = (sentThisAttempt: number): void => {
      // A retry starts the shard again from its first byte.
      progress?.addBytes(sentThisAttempt - sentThisShard);
      sentThisShard = sentThisAttempt;
    };
    const sourceDir = upload.source_dir;
    const blocksFrom: PlannedBlockPages = (from, count) =>
      input.queue.blocksOf(upload.version_id, shard.shard_cid, from, count);
    await client.uploadShard(
      upload.storage_host,
      upload.storage_authorization,
      upload.version_id,
      shard.shard_cid,
      sourceDir === null
        ? { file: shard.file, bytes: shard.bytes, onSent }
        : {
            stream: () => plannedShardBody(sourceDir, blocksFrom, onSent, largeBlockHasher),
            bytes: shard.bytes,
          },
    );
    const tookMs = performance.now() - started;
    slowestShardMs = Math.max(slowestShardMs, tookMs);
    if (shard.bytes >= TIMED_SHARD_MIN_BYTES) {
      timed.bytes += shard.bytes;
      timed.ms += tookMs;
    }
    input.queue.confirm(upload.version_id, shard.shard_cid);
    sent += shard.bytes;
    confirmed += 1;
    input.afterShardConfirmed?.(confirmed);
  };
  /** The first shard that failed, and why; the shards already on their way still finish. */
  const first: { failed?: { readonly shard: QueuedShard; readonly error: unknown } } = {};
  let next = 0;
  const sendInTurn = async (): Promise<void> => {
    for (let shard = due[next]; shard !== undefined && !first.failed; shard = due[next]) {
      next += 1;
      try {
        throwIfStopped(input.signal);
        // The window ends by the service's clock, which its authorization states.
        const window = windowState(
          upload.storage_authorization,
          client.serverNow(),
          slowestShardMs,
          canCarryOver,
        );
        if (window === 'ending')
          throw new WindowEnding(
            upload.version_id,
            confirmedBefore + confirmed,
            upload.storage_authorization,
            sent,
          );
        if (window === 'over') throw new WindowOver();
        await sendShard(shard);
      } catch (error) {
        first.failed ??= { shard, error };
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: SHARDS_IN_FLIGHT }, sendInTurn));
    if (first.failed) throw first.failed.error;
    progress?.finish();
    await client.completeVersion(
      upload.storage_host,
      upload.storage_authorization,
      upload.version_id,
    );
  } catch (error) {
    try {
      reportTimed();
    } catch {
      // The upload's failure is what the user must see (a full disk fails this write as well).
      // Without this sample, the next backup sizes its shards by the ones before.
    }
    // A 413 for a shard refuses that shard as too large; one for the completion is no such thing.
    const failure = first.failed;
    const shard = failure && failure.error === error ? failure.shard : undefined;
    const refused =
      shard && error instanceof EngineError && error.code === 'payload_too_large'
        ? new ShardRefused(shard.bytes, error)
        : undefined;
    // Before its window ends, the version is left pending, holding what it received, and
    // queued: the caller goes on as a new version (carryOver, or supersedeUpload). The shards
    // on their way when the end neared have arrived by now, and count.
    if (error instanceof WindowEnding)
      throw new WindowEnding(
        upload.version_id,
        confirmedBefore + confirmed,
        upload.storage_authorization,
        sent,
      );
    // Its window ended (unseen, or the host answers 409 or 401): it cannot be completed, and
    // what it received is no longer held for it.
    if (
      error instanceof WindowOver ||
      (await isUploadWindowOver(error, client, upload.bucket_id, upload.version_id))
    ) {
      await client.discardVersion(upload.version_id);
      input.queue.finish(upload.version_id);
      await removeStaging(upload.staging_dir);
      throw uploadWindowOver(upload.storage_authorization, error);
    }
    // Another device stored first, a source file changed since it was packed, or a shard is too
    // large for the host: this pending version cannot be completed as it is; drop it, and the
    // caller builds a new one (§10.3).
    if (
      isEngineError(error, 'stale_previous') ||
      isEngineError(error, 'source_changed') ||
      refused
    ) {
      await client.discardVersion(upload.version_id);
      input.queue.finish(upload.version_id);
      await removeStaging(upload.staging_dir);
    }
    throw refused ?? error;
  } finally {
    await hasher?.close();
  }
  reportTimed();
  input.queue.finish(upload.version_id);
  await removeStaging(upload.staging_dir);
  return sent;
}

/**
 * Leaves `upload`'s version pending, holding what it received, for a version yet to be packed
 * to take over: recorded as superseded, so that one is deleted once that version's upload is
 * queued, by this run or the next (dropSuperseded).
 */
async function supersedeUpload(input: BackupInput, upload: QueuedUpload): Promise<void> {
  input.queue.supersede(upload.version_id, input.now());
  await removeStaging(upload.staging_dir);
}

/**
 * Goes on with an upload nearing its window's end as a new version of the same tree, pushed
 * again from the same metadata CAR: what the first version received is claimed through
 * blocks/missing, and the shards still to send are the ones queued, read from the source again.
 * Packing the source anew would read every file again, once per window of a backup that takes
 * days. Returns the new version's upload, with the old one recorded as superseded; null when
 * the shards queued do not carry every leaf the host lacks (staged shards, or a block the host
 * let go), which leaves the old one superseded for the caller to pack anew.
 */
async function carryOver(
  input: BackupInput,
  upload: QueuedUpload,
  ending: WindowEnding,
  pushed: { readonly pushedAs: PushedAs | null; readonly metadataFile: string | null },
  /** The leaves of the version it builds on; undefined for none. */
  previousLeaves: LeafSizes | undefined,
): Promise<QueuedUpload | null> {
  const { pushedAs, metadataFile } = pushed;
  // A window that let no shard through is too short for this backup (backupSource's renew).
  if (ending.confirmed === 0 || !pushedAs || metadataFile === null || upload.source_dir === null) {
    await supersedeUpload(input, upload);
    return null;
  }
  let again: MetadataUploadResult | undefined;
  try {
    const { leaves } = await readTreeLeavesOfFile(metadataFile);
    /** The leaves the version lacks from the one it builds on. */
    const isCandidate = (leaf: number): boolean => previousLeaves?.has(leaves.cidAt(leaf)) !== true;
    const push = async (expectedDataSize: number): Promise<MetadataUploadResult> => {
      input.queue.notePush(input.bucketId, pushedAs.metadataCid, input.now());
      const pushedAgain = await input.client.pushVersion({
        bucketId: input.bucketId,
        ...pushedAs,
        expectedDataSize,
        validKeys: [],
        car: await openAsBlob(metadataFile),
      });
      if (pushedAgain.state !== 'pending')
        throw new Error(`a version pushed again with data to receive is ${pushedAgain.state}`);
      return pushedAgain;
    };
    /** With a bridge: at most these leaves may be missing, as the new version expects no more. */
    let allowedMissing: ReadonlySet<string> | undefined;
    try {
      again = await push(pushedAs.expectedDataSize);
    } catch (error) {
      if (!isEngineError(error, 'quota_exceeded')) throw error;
      const bridged = await pushThroughBridge(input, upload, leaves, isCandidate, push);
      again = bridged.pushed;
      allowedMissing = bridged.missing;
    }
    const carried = again;
    // Every leaf the version lacks must be held, or in a shard still to send, before the new
    // version may complete.
    const missing = new Set<string>();
    await askMissing(input.client, carried, leaves, isCandidate, (cid) => missing.add(cid));
    const beyondExpected = [...missing].some((cid) => allowedMissing?.has(cid) === false);
    // Blocks to send again are held, as far as the host knows, and the new version inherits
    // them: a shard carrying one goes unless the host confirmed it (and replaced its damaged
    // copy then). A block to send again in no shard queued packs anew.
    const resend = new Set(
      [...(input.resendLeaves ?? [])].filter((cid) => leaves.indexOfText(cid) >= 0),
    );
    const confirmed = new Set(
      input.queue
        .shardsOf(upload.version_id)
        .filter((shard) => shard.confirmed !== 0)
        .map((shard) => shard.shard_cid),
    );
    // The shards that carry them: sent again even if the old version's host confirmed them.
    const needed = new Set<string>();
    for (const block of input.queue.blocksOfUpload(upload.version_id)) {
      if (resend.delete(block.cid) && !confirmed.has(block.shard_cid)) needed.add(block.shard_cid);
      if (!missing.has(block.cid)) continue;
      needed.add(block.shard_cid);
      missing.delete(block.cid);
    }
    if (missing.size > 0 || resend.size > 0 || beyondExpected) {
      await input.client.discardVersion(carried.id);
      await supersedeUpload(input, upload);
      return null;
    }
    const next: QueuedUpload = {
      ...upload,
      version_id: carried.id,
      storage_host: carried.storage_host,
      storage_authorization: carried.storage_authorization,
      created_at: input.now(),
    };
    input.queue.carryOver(upload.version_id, next, needed, input.now());
    input.queue.forgetPush(input.bucketId, pushedAs.metadataCid);
    return next;
  } catch (error) {
    // The caller sees why (another device stored first, a full quota, a dead network); the
    // old version is left to the next version queued.
    if (input.queue.pendingFor(input.bucketId)?.version_id === upload.version_id)
      await supersedeUpload(input, upload);
    if (again?.state === 'pending') {
      try {
        await input.client.discardVersion(again.id);
      } catch {
        // Left pending, it becomes upload_failed when its window ends (§10.2).
      }
    }
    throw error;
  }
}

/** What a queued upload was pushed with (QueuedUpload.pushed_as); null when not recorded. */
function pushedAsOf(upload: QueuedUpload): PushedAs | null {
  if (upload.pushed_as === null) return null;
  return JSON.parse(upload.pushed_as) as PushedAs;
}

/** Whether `upload` can go on as a new version of the same tree (carryOver). */
function canCarryOver(upload: QueuedUpload): boolean {
  return (
    upload.source_dir !== null &&
    upload.pushed_as !== null &&
    upload.metadata_file !== null &&
    existsSync(upload.metadata_file)
  );
}

/**
 * Pushes the tree again when the quota has no room for both the old version's unsent rest and
 * the new version's whole expected size (§11.6 counts each pending version's): first as a
 * bridge expecting a single byte, which claims what the old version received; then, with the
 * old version deleted and its unsent rest no longer counted, as the version that takes the
 * upload over, expecting only the bytes still missing. The bridge is recorded as superseded,
 * and goes once the new version's upload is queued. Returns that version, and the leaves
 * missing when the bridge asked: the most it may need.
 */
async function pushThroughBridge(
  input: BackupInput,
  upload: QueuedUpload,
  leaves: LeafSizes,
  isCandidate: (leaf: number) => boolean,
  push: (expectedDataSize: number) => Promise<MetadataUploadResult>,
): Promise<{ pushed: MetadataUploadResult; missing: ReadonlySet<string> }> {
  const bridge = await push(1);
  input.queue.recordSuperseded(bridge.id, input.bucketId, input.now());
  const missing = new Set<string>();
  await askMissing(input.client, bridge, leaves, isCandidate, (cid) => missing.add(cid));
  // What the old version received is the bridge's too now.
  await input.client.discardVersion(upload.version_id);
  let missingBytes = 0;
  for (const cid of missing) missingBytes += leaves.sizeOfText(cid) ?? 0;
  // A version expecting nothing would be active at once, before its completion is checked.
  return { pushed: await push(Math.max(1, missingBytes)), missing };
}

/**
 * Finishes an upload a killed run left behind; null when there was none or it is moot. What it
 * sends is added to `sent.bytes` as it goes, failing or not.
 */
async function resumeInterrupted(
  input: BackupInput,
  sent: { bytes: number },
): Promise<string | null> {
  const pending = input.queue.pendingFor(input.bucketId);
  if (!pending) return null;
  let upload = pending;
  try {
    // The host may have moved since (the embedded service listens on a new port each run);
    // who_am_i names the current one (§1).
    upload = { ...pending, storage_host: (await input.client.whoAmI()).storage_host };
    for (;;) {
      const current = upload;
      const carries = canCarryOver(current);
      try {
        sent.bytes += await finishUpload(input, current, carries);
        break;
      } catch (error) {
        if (!(error instanceof WindowEnding)) throw error;
        sent.bytes += error.sentBytes;
        let pushedAs = carries ? pushedAsOf(current) : null;
        let previousLeaves: LeafSizes | undefined;
        try {
          if (pushedAs && pushedAs.previousId !== null)
            previousLeaves = (await input.loadTree(pushedAs.previousId, false)).leaves;
        } catch {
          // The version it built on cannot be read now: packing anew says why, if it matters.
          pushedAs = null;
        }
        const next = await carryOver(
          input,
          current,
          error,
          { pushedAs, metadataFile: current.metadata_file },
          previousLeaves,
        );
        // Superseded by now: this run packs anew.
        if (!next) throw error;
        input.fileIndex.resealStage(current.version_id, next.version_id);
        upload = next;
        await dropSuperseded(input);
      }
    }
    // The files the killed run read are known now as they were then.
    input.fileIndex.adoptStage(upload.version_id);
    if (upload.metadata_file !== null && existsSync(upload.metadata_file))
      await input.keepMetadata?.(upload.version_id, upload.metadata_file);
    await removeMetadataFile(upload.metadata_file);
    return upload.version_id;
  } catch (error) {
    if (error instanceof WindowEnding) {
      await removeMetadataFile(upload.metadata_file);
      throw error;
    }
    // Its window ended, its bucket or key went away, or another version won: this run's new
    // backup supersedes it. Anything else (network, quota) is the user's to see.
    const moot =
      error instanceof EngineError &&
      [
        'not_authorized',
        'not_found',
        'conflict',
        'stale_previous',
        'source_changed',
        'upload_window_over',
      ].includes(error.code);
    if (!moot) {
      if (!stillQueued(input, upload.version_id)) await removeMetadataFile(upload.metadata_file);
      throw error;
    }
    input.queue.finish(upload.version_id);
    await removeStaging(upload.staging_dir);
    await removeMetadataFile(upload.metadata_file);
    return null;
  }
}

/**
 * Deletes the versions a killed run pushed and never recorded (UploadQueue.notePush): pending
 * on the service with a noted metadata CID, and neither queued nor superseded here. Left
 * there, each would count toward the quota all it expects until its window ends.
 */
async function dropUnrecordedPushes(input: BackupInput): Promise<void> {
  const noted = input.queue.pushesIn(input.bucketId);
  if (noted.length === 0) return;
  const versions = await input.client.listVersions(input.bucketId);
  const recorded = input.queue.recordedVersions();
  for (const metadataCid of noted) {
    for (const version of versions) {
      if (version.state !== 'pending' || version.metadata_cid !== metadataCid) continue;
      if (recorded.has(version.id)) continue;
      try {
        await input.client.discardVersion(version.id);
      } catch (error) {
        // Gone meanwhile (its window ended, and its retention after it).
        if (!isEngineError(error, 'not_found')) throw error;
      }
    }
    input.queue.forgetPush(input.bucketId, metadataCid);
  }
}

/**
 * Deletes the versions of the bucket left pending when their windows neared their ends
 * (UploadQueue.supersede), now that a version holding what they received is queued or stored.
 * Left pending, each would count toward the quota what it has yet to receive.
 */
async function dropSuperseded(input: BackupInput): Promise<void> {
  for (const versionId of input.queue.supersededIn(input.bucketId)) {
    try {
      await input.client.discardVersion(versionId);
    } catch (error) {
      // The backup goes on, and the next one tries again; meanwhile a version left pending
      // becomes upload_failed when its window ends, and the service deletes it after its
      // retention (§10.2).
      if (!isEngineError(error, 'not_found')) continue;
    }
    input.queue.forgetSuperseded(versionId);
  }
}

export async function backupSource(input: BackupInput): Promise<BackupResult> {
  const started = input.now();
  let run = input;
  let steppedDown = false;
  /** After a shard was refused as too large: smaller shards from now on, or the user's error. */
  const stepDown = (refused: ShardRefused): void => {
    const target = targetAfterRefusal(refused, run.shardTargetBytes ?? MAX_SHARD_TARGET_BYTES);
    run = { ...run, shardTargetBytes: target };
    steppedDown = true;
  };
  let resumedVersionId: string | null = null;
  /** What finishing an interrupted upload sent, which this run's result counts as uploaded. */
  const resumedSent = { bytes: 0 };
  /**
   * Versions left pending as their windows neared their ends (by this run, or by one stopped
   * since) go once a new version's upload is queued: blocks/missing has added what they
   * received to that version's set by then.
   */
  const dropAllSuperseded = (): Promise<void> => dropSuperseded(input);
  /**
   * Goes on as a new version, unless this window let no shard through (packing and pushing
   * took three quarters of it): then the backup cannot fit any window.
   */
  const renew = async (ending: WindowEnding): Promise<void> => {
    if (ending.confirmed > 0) return;
    await dropAllSuperseded();
    throw uploadWindowOver(ending.storageAuthorization, ending, true);
  };
  await dropUnrecordedPushes(run);
  try {
    resumedVersionId = await resumeInterrupted(run, resumedSent);
  } catch (error) {
    // Its shards were planned larger than the host now takes, or its window ends soon: this
    // run packs anew.
    if (error instanceof ShardRefused) stepDown(error);
    else if (!(error instanceof WindowEnding)) throw error;
  }
  // A run killed while packing leaves staged shards no queued upload refers to.
  await removeAbandonedStaging(input.stagingRoot, input.queue.stagingDirs());
  let shardSource: ShardSource = 'planned';
  let rebuilt = false;
  let droppedForQuota = false;
  for (;;) {
    try {
      const result = await attempt(run, started, shardSource, dropAllSuperseded);
      if (steppedDown && run.shardTargetBytes !== undefined)
        input.onShardLimit?.(run.shardTargetBytes);
      // A version that stored nothing new queued no upload.
      await dropAllSuperseded();
      return {
        ...result,
        bytesUploaded: result.bytesUploaded + resumedSent.bytes,
        resumedVersionId,
      };
    } catch (error) {
      if (error instanceof WindowEnding) {
        await renew(error);
      } else if (
        isEngineError(error, 'quota_exceeded') &&
        !droppedForQuota &&
        input.queue.supersededIn(input.bucketId).length > 0
      ) {
        droppedForQuota = true;
        // What the versions left pending have yet to receive counts toward the quota, and the
        // new version counts it again: near a full quota they go first, and what they received
        // is sent again.
        await dropAllSuperseded();
      } else if (isEngineError(error, 'source_changed') && shardSource === 'planned') {
        shardSource = 'staged';
      } else if (isEngineError(error, 'stale_previous') && !rebuilt) {
        rebuilt = true;
      } else if (isEngineError(error, 'stale_previous')) {
        throw new EngineError(
          'stale_previous',
          'another device stored a version to this bucket twice while this backup ran: run the backup again',
          { retryable: true, cause: error },
        );
      } else if (error instanceof ShardRefused) {
        stepDown(error);
      } else throw error;
    }
  }
}
