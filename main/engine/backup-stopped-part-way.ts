import { formatBytes, isPassingFailure, withMoreSaid } from '../api/index.ts';
import { uploadQueue, type StateDb } from '../state/index.ts';

// A backup the network or the server stopped after its version was pushed leaves its upload
// queued (state/upload-queue.ts): the shards the host confirmed stay there, and the next run
// sends only the others (resume-interrupted.ts). Told only "cannot reach …", a user who watched
// gigabytes go could not know that: the failure says what was sent.

/**
 * `error`, which stopped a backup to the bucket `bucketId`, saying what of its upload stays
 * with the server and that running it again sends the rest; as it came when no upload is
 * queued (nothing was pushed), or when running it again would not help.
 */
export function backupStoppedPartWay(error: unknown, db: StateDb, bucketId: string): unknown {
  if (!isPassingFailure(error)) return error;
  let sent = 0;
  let total = 0;
  try {
    const queue = uploadQueue(db);
    const upload = queue.pendingFor(bucketId);
    if (!upload) return error;
    for (const shard of queue.shardsOf(upload.version_id)) {
      if (shard.needed === 0) continue;
      total += shard.bytes;
      if (shard.confirmed === 1) sent += shard.bytes;
    }
  } catch {
    // The state cannot be read now (its disk failing too): the failure is told as it came,
    // rather than replaced by this one.
    return error;
  }
  return withMoreSaid(
    error,
    `the backup stopped part way: ${formatBytes(sent)} of its ${formatBytes(total)} of data were sent and stay with the server; running it again sends only the rest`,
  );
}
