import { EngineError, isEngineError } from '../api/index.ts';
import { LeafSizes } from '../packer/index.ts';
import { DEFAULT_LIMITS } from '../protocol/index.ts';
import { excludingFolders, loadExcludeRules } from '../scanner/index.ts';
import { removeAbandonedStaging, type QueuedUpload } from '../state/index.ts';
import { isDamagedMetadata, type TreeLeaves } from './previous-tree.ts';
import { GarbageAtPhaseSwitch } from './garbage-at-phase-switch.ts';
import { ShardRefused, targetAfterRefusal } from './shard-refusal.ts';
import { uploadWindowOver, WindowEnding } from './upload-window.ts';
import { MAX_SHARD_TARGET_BYTES } from './shard-target.ts';
import { ScanProgress } from './progress-meter.ts';
import { surveySource, type OtherVouchers } from './unchanged-source.ts';
import { sourceTooLarge } from './source-too-large.ts';
import type { BackupInput, BackupResult } from './backup-input.ts';
import { stillQueued, removeMetadataFile } from './queued-upload-files.ts';
import { finishUpload } from './finish-upload.ts';
import { carryOver } from './carry-over.ts';
import { resumeInterrupted } from './resume-interrupted.ts';
import { otherSourceRefusal } from './other-source.ts';
import { dropUnrecordedPushes, dropSuperseded } from './superseded-versions.ts';
import { untrustedOf, packAndPush, type ShardSource, type PushedVersion } from './pack-and-push.ts';

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

async function attempt(
  input: BackupInput,
  started: number,
  firstShardSource: ShardSource,
  /** Called once the new version's upload is queued, and holds what the host has of it. */
  onUploadQueued: () => Promise<void>,
): Promise<BackupResult> {
  const { client } = input;
  const active = (await client.listVersions(input.bucketId)).find(
    (version) => version.state === 'active',
  );
  const indexIsActive = active !== undefined && input.fileIndex.versionId === active.id;
  // A folder never backed up here may be the folder of the active version renamed or moved:
  // its files are as that folder's index saw them, and its rules those kept for it, unless it
  // has rules of its own.
  const neverBackedUpHere = active !== undefined && input.fileIndex.versionId === null;
  const former = neverBackedUpHere ? input.formerIndexOf?.(active.id) : undefined;
  const formerExcludes =
    neverBackedUpHere && (input.excludes ?? []).length === 0
      ? input.formerExcludesOf?.(active.id)
      : undefined;
  const rules = excludingFolders(
    await loadExcludeRules(input.sourceDir, formerExcludes?.rules ?? input.excludes),
    input.sourceDir,
    input.ownFolders ?? [],
  );
  const others: OtherVouchers = {
    ...(input.restoredFiles ? { restored: input.restoredFiles } : {}),
    ...(former ? { former } : {}),
  };
  // Blocks to send again are found only by reading the files that hold them: nothing is taken
  // as unchanged from the index, neither the source nor a folder.
  const resend = input.resendLeaves ?? new Set<string>();
  // A version is made even of an unchanged source, to take the place of one whose metadata
  // the server holds damaged.
  let storeAgain = active !== undefined && active.id === input.storeAgainVersion;
  // The walk that looks for changes also counts what to read, for progress, and the least
  // metadata the tree makes: a source too large for one version is refused before its files
  // are read, not once 800 000 of them were.
  const scanning = input.onProgress ? new ScanProgress(input.onProgress, input.now) : undefined;
  const metadataLimitBytes = input.metadataLimitBytes ?? DEFAULT_LIMITS.metadataCarBytes;
  const survey = await surveySource(input.sourceDir, rules, input.fileIndex, {
    onFile: (bytes) => scanning?.found(bytes),
    others,
    metadataLimit: { bytes: metadataLimitBytes, stop: true },
  });
  scanning?.finish();
  if (survey.metadataFloorBytes > metadataLimitBytes)
    throw sourceTooLarge(input.sourceDir, metadataLimitBytes);
  if (indexIsActive && survey.unchanged && resend.size === 0 && !storeAgain) {
    return {
      versionId: active.id,
      files: survey.files,
      bytesScanned: survey.bytes,
      bytesRead: 0,
      filesUnchanged: survey.files,
      newBytes: 0,
      heldBytes: 0,
      bytesUploaded: 0,
      metadataBytesUploaded: 0,
      durationMs: input.now() - started,
      skipped: [],
      changedWhileRead: [],
      unchanged: true,
      resumedVersionId: null,
      blocksResent: 0,
      metadataStoredAgain: false,
      excludesFrom: null,
    };
  }
  const { loadTree } = input;
  // Folders found unchanged reuse the active version's nodes, when the index describes it.
  const changedFolders = indexIsActive && resend.size === 0 ? survey.changedFolders : null;
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
  const refusal =
    previous &&
    otherSourceRefusal(
      previous.tree.manifest['source_label'],
      input.sourceLabel,
      input.replaceSource === true,
    );
  if (refusal) throw refusal;
  // This folder is the bucket's source now: the rules it was backed up with stay with it.
  if (formerExcludes) input.keepExcludes?.(formerExcludes.rules);
  // Reading's totals: the files packing must read; with no previous version, every file.
  const readingTotals = {
    files: survey.files,
    bytes: previous ? survey.bytesToRead : survey.bytes,
  };
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
        others,
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
    heldBytes: pushed.heldBytes,
    bytesUploaded: uploaded,
    // backupSource counts every push of the run.
    metadataBytesUploaded: 0,
    durationMs: input.now() - started,
    skipped: pushed.skipped,
    changedWhileRead: pushed.changedWhileRead,
    unchanged: pushed.sameAsPrevious,
    resumedVersionId: null,
    blocksResent: pushed.blocksResent,
    metadataStoredAgain: storeAgain && !pushed.sameAsPrevious,
    excludesFrom: formerExcludes?.dir ?? null,
  };
}

export async function backupSource(given: BackupInput): Promise<BackupResult> {
  const started = given.now();
  /** Every metadata CAR this run pushed, for attempts it then started over too: all were sent. */
  const metadataSent = { bytes: 0 };
  const input: BackupInput = { ...given, metadataSent };
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
        metadataBytesUploaded: metadataSent.bytes,
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
