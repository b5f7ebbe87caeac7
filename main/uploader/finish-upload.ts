import { EngineError, isEngineError, throwIfStopped } from '../api/index.ts';
import { ChunkHasher } from '../packer/chunk-hasher.ts';
import type { QueuedShard, QueuedUpload } from '../state/index.ts';
import { plannedShardBody, type PlannedBlockPages } from './planned-shard-body.ts';
import { ShardRefused } from './shard-refusal.ts';
import {
  isUploadWindowOver,
  uploadWindowOver,
  windowState,
  WindowEnding,
  WindowOver,
} from './upload-window.ts';
import { TIMED_SHARD_MIN_BYTES } from './shard-target.ts';
import { PhaseProgress } from './progress-meter.ts';
import type { BackupInput } from './backup-input.ts';
import { removeStaging } from './queued-upload-files.ts';
import { uploadDeletedError } from './deleted-upload.ts';

// The upload of a pushed version's queued shards, two at a time, each recorded as the host
// confirms it, then the version's completion (§11.2, §11.4).

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
export async function finishUpload(
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
            stream: () => plannedShardBody(sourceDir, blocksFrom, largeBlockHasher),
            bytes: shard.bytes,
            onSent,
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
      (await isUploadWindowOver(error, client, {
        bucketId: upload.bucket_id,
        versionId: upload.version_id,
        storageAuthorization: upload.storage_authorization,
      }))
    ) {
      await client.discardVersion(upload.version_id);
      input.queue.finish(upload.version_id);
      await removeStaging(upload.staging_dir);
      throw uploadWindowOver(upload.storage_authorization, error);
    }
    // The version, or its bucket, deleted while it was sent: it cannot be completed, and the
    // next backup starts anew.
    const deleted = await uploadDeletedError(error, client, {
      bucketId: upload.bucket_id,
      versionId: upload.version_id,
    });
    if (deleted) {
      input.queue.finish(upload.version_id);
      await removeStaging(upload.staging_dir);
      throw deleted;
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
