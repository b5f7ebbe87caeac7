import { isEngineError } from '../api/index.ts';
import type { BackupInput } from './backup-input.ts';

// Versions a backup pushed and no longer needs: pushed by a run killed before it recorded them,
// or left pending for a newer version to take over. Each counts toward the quota until deleted.

/**
 * Deletes the versions a killed run pushed and never recorded (UploadQueue.notePush): pending
 * on the service with a noted metadata CID, and neither queued nor superseded here. Left
 * there, each would count toward the quota all it expects until its window ends.
 */
export async function dropUnrecordedPushes(input: BackupInput): Promise<void> {
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
export async function dropSuperseded(input: BackupInput): Promise<void> {
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
