import { mkdir } from 'node:fs/promises';
import { isEngineError } from '../api/index.ts';
import { CID } from 'multiformats/cid';
import {
  cidText,
  DAG_PB_CODEC,
  DEFAULT_LIMITS,
  type MetadataUploadResult,
} from '../protocol/index.ts';
import { packSource, type LeafSizes, type PackInput, type ScannedFile } from '../packer/index.ts';
import { checkSourceStillThere, type ExcludeRules, type SkippedItem } from '../scanner/index.ts';
import { isServiceRefusal } from '../service/index.ts';
import {
  newStagingDir,
  type QueuedUpload,
  type ShardPlan,
  type ShardToQueue,
  type SourceFileIndex,
  type StagedEntries,
  type UntrustedEntries,
} from '../state/index.ts';
import { leavesOfFile, listedLeavesInTree, type TreeLeaves } from './previous-tree.ts';
import type { GarbageAtPhaseSwitch } from './garbage-at-phase-switch.ts';
import { MetadataCarFile, MetadataOverLimit } from './metadata-car-file.ts';
import { dropStrayLeaves } from './stray-leaves.ts';
import { dropHeldLeaves } from './held-blocks.ts';
import { ShardPlanner, type PlannedShard } from './shard-planner.ts';
import { MAX_SHARD_TARGET_BYTES } from './shard-target.ts';
import { ShardWriter, type StagedShard } from './shard-writer.ts';
import type { LeafShards } from './leaf-shards.ts';
import { PhaseProgress } from './progress-meter.ts';
import { sourceTooLarge } from './source-too-large.ts';
import {
  sameEntry,
  vouchedElsewhere,
  vouchingEntry,
  type OtherVouchers,
} from './unchanged-source.ts';
import { askMissing, type PushedUpload } from './ask-missing.ts';
import { pushWithinQuota } from './quota-probe.ts';
import { pushFromFile } from './metadata-push.ts';
import type { BackupInput } from './backup-input.ts';
import { removeStaging, removeUnsentShards } from './queued-upload-files.ts';
import type { PushedAs } from './carry-over.ts';

// Packing a source folder into a version and pushing it (§17.4): its metadata CAR, its leaves
// laid out in shards (planned, or staged on disk), the version pushed and its upload queued
// with the shards that carry a leaf the host lacks.

const MAX_DELETED_IN_REQUEST = 1500; // keeps request-data well under 128 KiB (§11.6 allows a subset)

/**
 * A file modified this close to the scan (by its mtime and its ctime: file-index.ts) may change
 * again within the same tick, unseen by a later stat; it is read next time rather than trusted
 * from the index.
 */
const RACY_MTIME_NS = 2_000_000_000n;

/**
 * Reuse a file's leaves when the index shows it unchanged and the active version holds them:
 * the leaves its index entry lists, or, in an index from before entries listed them, those of
 * its File node in the active version's tree; or, for a file the index does not know, what
 * another record vouches for (OtherVouchers). A file holding a leaf to send again is read.
 */
function reuseUnchanged(
  index: SourceFileIndex,
  others: OtherVouchers,
  previous: TreeLeaves | undefined,
  resend: ReadonlySet<string>,
  /** Takes the size of each file read only to send a leaf again: the survey counted it unread. */
  onReadToResend: (bytes: number) => void,
): PackInput['reuse'] {
  if (!previous) return undefined;
  const leavesOf = (file: ScannedFile): Array<{ cid: CID; size: number }> | undefined => {
    const known =
      vouchingEntry(index, file, index.lookup(file.path)) ?? vouchedElsewhere(others, file);
    if (known?.leaves) return listedLeavesInTree(previous, known.leaves, file.size);
    return known?.cid ? leavesOfFile(previous, known.cid, file.size) : undefined;
  };
  return (file) => {
    const leaves = leavesOf(file);
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
export function untrustedOf(
  changedWhileRead: readonly string[],
  scanStartedMs: number,
): UntrustedEntries {
  return {
    paths: changedWhileRead,
    filesModifiedFromNs: BigInt(scanStartedMs) * 1_000_000n - RACY_MTIME_NS,
  };
}

/**
 * Where the upload takes shard bytes from: the source files again (`planned`), or shard files
 * written while packing (`staged`).
 */
export type ShardSource = 'planned' | 'staged';

/** The bucket's active version, which a backup builds on. */
interface PreviousVersion {
  readonly id: string;
  readonly rootCid: string;
  readonly tree: TreeLeaves;
}

/** A version packed and pushed: what the rest of the backup needs, and nothing more. */
export interface PushedVersion {
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
  /** Of `newBytes`, those the host said it held already (BackupResult.heldBytes). */
  readonly heldBytes: number;
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
export async function packAndPush(
  input: BackupInput,
  previous: PreviousVersion | null,
  rules: ExcludeRules,
  firstShardSource: ShardSource,
  /** What the reading phase reports progress against: the files the survey found to read. */
  totals: { readonly files: number; readonly bytes: number },
  garbage: GarbageAtPhaseSwitch,
  /** Takes the packed entries for the file index; cleared when the source is packed again. */
  staged: StagedEntries,
  /** Folders the survey found changed; every other is reused. Null: none is. */
  changedFolders: ReadonlySet<string> | null,
  /** Blocks to send again, by CID text (BackupInput.resendLeaves). */
  resend: ReadonlySet<string>,
  /** Push even a tree the previous version has (BackupInput.storeAgainVersion). */
  storeAgain: boolean,
  /** Records besides the file index that may vouch for a file it does not. */
  others: OtherVouchers,
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
    const reuse = reuseUnchanged(input.fileIndex, others, previous?.tree, resend, (bytes) =>
      passProgress?.addToTotal(bytes),
    );
    const reuseFolder = reuseUnchangedFolders(input.fileIndex, previous?.tree, changedFolders);
    // The times the version built on gave its entries: as the file index records them when it
    // describes that version, else from the version's tree, when its nodes were read.
    const timeInVersion =
      previous && input.fileIndex.versionId === previous.id
        ? (relativePath: string) => input.fileIndex.lookup(relativePath)?.mtimeNs
        : previous?.tree.nodes && input.timesInTree
          ? input.timesInTree(previous.rootCid, previous.tree.nodes)
          : undefined;
    // File mtimes are on the wall clock, whatever clock `now` is.
    let scanStartedMs = Date.now();
    const { onProgress } = input;
    const packOnce = async (): ReturnType<typeof packSource> => {
      scanStartedMs = Date.now();
      const progress = onProgress
        ? new PhaseProgress('reading', totals.files, totals.bytes, onProgress, input.now)
        : undefined;
      passProgress = progress;
      const nodes = await newMetadata();
      const packed = await packSource({
        rules,
        nodes,
        ...(reuse ? { reuse } : {}),
        ...(timeInVersion ? { timeInVersion } : {}),
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
    // Deleted while read, its files were skipped one by one as deleted: a version of what was
    // read before would stand for a folder no longer there, and become the active one.
    checkSourceStillThere(input.sourceDir);
    await dropStrayLeaves(shards, tree.strayLeaves, tree.leaves, input.sourceDir);
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
        heldBytes: 0,
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
    const push = (expectedDataSize: number): Promise<MetadataUploadResult> =>
      pushFromFile(input, { ...pushedAs, expectedDataSize }, metadataFile, tree.fileCount).catch(
        (error: unknown) => {
          // The service's own 413 for a push is its limit on the metadata CAR (request-data is
          // kept well under its own): a service with a lower limit than the spec's. A proxy's
          // 413 is told as such.
          throw isServiceRefusal(error, 'payload_too_large')
            ? sourceTooLarge(input.sourceDir)
            : error;
        },
      );
    // Noted before it is asked for: killed before the upload is recorded, the next backup
    // deletes what the service made of it (dropUnrecordedPushes).
    input.queue.notePush(input.bucketId, pushedAs.metadataCid, input.now());
    let pushed: MetadataUploadResult | { id: string; state: 'active' };
    try {
      pushed = await push(expected);
    } catch (error) {
      // A push of no data whose answer was lost activated its version, and the push sent again
      // was refused as stale: the version is stored, and this backup made it.
      const activated = isEngineError(error, 'stale_previous')
        ? await client.activatedPush({ bucketId: input.bucketId, ...pushedAs })
        : undefined;
      if (activated !== undefined) pushed = { id: activated, state: 'active' };
      else {
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
    }
    let upload: QueuedUpload | null = null;
    let heldBytes = 0;
    if (pushed.state === 'pending') {
      const { needed, missing } = await shardsNeeded(input, pushed, tree.leaves, shards.leafShards);
      // The host counts a block to send again held: its shard goes all the same.
      for (const leaf of resent) {
        const shard = shards.leafShards.shardOf(leaf);
        if (shard !== undefined) needed.add(shard);
      }
      const resentLeaves = new Set(resent);
      heldBytes = bytesHeld(tree.leaves, shards.leafShards, missing, resentLeaves);
      try {
        await dropHeldLeaves(
          shards,
          tree.leaves,
          needed,
          (leaf) => missing[leaf] === 1 || resentLeaves.has(leaf),
          {
            sourceDir: input.sourceDir,
            uploadBytesPerSecond: input.expectedUploadBytesPerSecond,
            ...(onProgress
              ? {
                  progressOf: (count: number, bytes: number) =>
                    new PhaseProgress('trimming', count, bytes, onProgress, input.now),
                }
              : {}),
          },
        );
      } catch (error) {
        // A planned shard's source changed since it was read (a staged one that cannot be
        // written again goes whole): this run packs anew, staged, and the version goes.
        await discardUnqueued(input, pushed.id, pushedAs.metadataCid);
        throw error;
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
      await removeUnsentShards(queued);
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
      heldBytes,
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
 * The bytes of the leaves laid out in shards that the host holds (not `missing`), save those to
 * be sent again all the same.
 */
function bytesHeld(
  leaves: LeafSizes,
  leafShards: LeafShards,
  missing: Uint8Array,
  resent: ReadonlySet<number>,
): number {
  let bytes = 0;
  for (let leaf = 0; leaf < leaves.count; leaf++)
    if (leafShards.shardOf(leaf) !== undefined && missing[leaf] !== 1 && !resent.has(leaf))
      bytes += leaves.sizeAt(leaf) ?? 0;
  return bytes;
}

/**
 * The numbers of the shards holding a leaf the host lacks, and those leaves (1 at a leaf's
 * number). The leaves laid out in shards are asked about in lists of 10 000 (§11.3), their CID
 * text made for each list and dropped after.
 */
async function shardsNeeded(
  input: BackupInput,
  pushed: PushedUpload,
  leaves: LeafSizes,
  leafShards: LeafShards,
): Promise<{ needed: Set<number>; missing: Uint8Array }> {
  const needed = new Set<number>();
  const missing = new Uint8Array(leaves.count);
  await askMissing(
    input.client,
    pushed,
    leaves,
    (leaf) => leafShards.shardOf(leaf) !== undefined,
    (cid) => {
      const leaf = leaves.indexOfText(cid);
      const shard = leafShards.shardOf(leaf);
      if (shard === undefined) return;
      needed.add(shard);
      missing[leaf] = 1;
    },
  );
  return { needed, missing };
}

/**
 * Deletes a pushed version whose upload was never queued. Should that fail too, it stays noted
 * (notePush), and the next backup of the bucket deletes it; the caller's error is the one to
 * tell.
 */
async function discardUnqueued(
  input: BackupInput,
  versionId: string,
  metadataCid: string,
): Promise<void> {
  try {
    await input.client.discardVersion(versionId);
  } catch {
    return;
  }
  input.queue.forgetPush(input.bucketId, metadataCid);
}
