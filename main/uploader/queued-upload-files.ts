import { rm } from 'node:fs/promises';
import { nodeIndexFileOf } from '../state/index.ts';
import type { BackupInput } from './backup-input.ts';

// The files a queued upload keeps on this computer (its staged shards, its metadata CAR), and
// whether it is queued still: what a backup may remove, and when.

/** Whether the upload of `versionId` is queued still, for a later run to finish. */
export function stillQueued(input: BackupInput, versionId: string): boolean {
  return versionId !== '' && input.queue.pendingFor(input.bucketId)?.version_id === versionId;
}

/** Removes a pushed metadata CAR's file, and the index of its nodes. */
export async function removeMetadataFile(file: string | null): Promise<void> {
  if (file === null) return;
  await rm(file, { force: true });
  await rm(nodeIndexFileOf(file), { force: true });
}

/** Removes a staging folder; planned shards have none (''). */
export async function removeStaging(dir: string): Promise<void> {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
}

/**
 * Removes the staged files of the shards an upload will not send, once it is queued: the host
 * holds every block in them. Only shards queued as needed are read again (finish-upload.ts),
 * and an upload carried over to a new version plans its shards from the source, never from
 * staged ones (carry-over.ts): kept to the end, they held the disk for nothing.
 */
export async function removeUnsentShards(
  shards: ReadonlyArray<{ readonly file: string; readonly needed: boolean }>,
): Promise<void> {
  await Promise.all(
    shards
      .filter((shard) => !shard.needed && shard.file !== '')
      .map((shard) => rm(shard.file, { force: true })),
  );
}
