import { existsSync } from 'node:fs';
import { EngineError } from '../api/index.ts';
import type { LeafSizes } from '../packer/index.ts';
import { WindowEnding } from './upload-window.ts';
import type { BackupInput } from './backup-input.ts';
import { stillQueued, removeMetadataFile, removeStaging } from './queued-upload-files.ts';
import { finishUpload } from './finish-upload.ts';
import { carryOver, pushedAsOf, canCarryOver } from './carry-over.ts';
import { dropSuperseded } from './superseded-versions.ts';

// The upload a killed or stopped backup left queued, finished first by the next backup of the
// bucket: its confirmed shards are not sent again.

/**
 * Finishes an upload a killed run left behind; null when there was none or it is moot. What it
 * sends is added to `sent.bytes` as it goes, failing or not.
 */
export async function resumeInterrupted(
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
