import { stat } from 'node:fs/promises';
import type { MetadataUploadResult } from '../protocol/index.ts';
import type { BackupInput } from './backup-input.ts';
import type { PushedAs } from './carry-over.ts';
import { PhaseProgress } from './progress-meter.ts';

// A version pushed with its metadata CAR (§10.1), read from the file it was packed into. The
// CAR holds the whole tree (every folder's and file's node, §17), whatever changed: for a
// folder of 100 000 files some 15 MB, sent again with each version, and again whenever a
// version is pushed anew (carried over, or asked about the quota). What a backup reports as
// uploaded counts it, so a change of one file over a slow link is not told as a few bytes.

/**
 * Pushes `fields` with the metadata CAR in `file`, a version of `files` files; the CAR's bytes
 * are counted as sent, and told as they go as the 'pushing' phase of the backup's progress.
 */
export async function pushFromFile(
  input: BackupInput,
  fields: PushedAs,
  file: string,
  files: number,
): Promise<MetadataUploadResult> {
  const bytes = (await stat(file)).size;
  const progress = input.onProgress
    ? new PhaseProgress('pushing', files, bytes, input.onProgress, input.now, files)
    : undefined;
  let sentThisPush = 0;
  const pushed = await input.client.pushVersion({
    bucketId: input.bucketId,
    ...fields,
    validKeys: [],
    car: {
      file,
      bytes,
      onSent: (sentThisAttempt) => {
        // A retry sends the CAR again from its first byte.
        progress?.addBytes(sentThisAttempt - sentThisPush);
        sentThisPush = sentThisAttempt;
      },
    },
  });
  progress?.finish();
  if (input.metadataSent) input.metadataSent.bytes += bytes;
  return pushed;
}
