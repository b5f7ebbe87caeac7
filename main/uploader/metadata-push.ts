import { openAsBlob } from 'node:fs';
import type { MetadataUploadResult } from '../protocol/index.ts';
import type { BackupInput } from './backup-input.ts';
import type { PushedAs } from './carry-over.ts';

// A version pushed with its metadata CAR (§10.1), read from the file it was packed into. The
// CAR holds the whole tree (every folder's and file's node, §17), whatever changed: for a
// folder of 100 000 files some 15 MB, sent again with each version, and again whenever a
// version is pushed anew (carried over, or asked about the quota). What a backup reports as
// uploaded counts it, so a change of one file over a slow link is not told as a few bytes.

/** Pushes `fields` with the metadata CAR in `file`; the CAR's bytes are counted as sent. */
export async function pushFromFile(
  input: BackupInput,
  fields: PushedAs,
  file: string,
): Promise<MetadataUploadResult> {
  const car = await openAsBlob(file);
  const pushed = await input.client.pushVersion({
    bucketId: input.bucketId,
    ...fields,
    validKeys: [],
    car,
  });
  if (input.metadataSent) input.metadataSent.bytes += car.size;
  return pushed;
}
