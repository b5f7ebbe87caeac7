import { EngineError, isEngineError } from '../api/index.ts';
import type { ServiceClient } from '../service/index.ts';

// A pending version can be deleted while its upload runs: `canopy versions delete` from another
// device, or its bucket deleted. Its shards and its completion are then answered 404, which on
// its own reads "not found on the server" and leaves the user guessing what was not found. The
// upload is told as what happened: what it sent is not kept, and a backup run again starts anew.

/**
 * The user's error for `error`, a 404 from sending version `versionId`'s shards or completing
 * it, when the service no longer lists that version, or its bucket; undefined otherwise (the
 * caller reports the error as it came).
 */
export async function uploadDeletedError(
  error: unknown,
  client: ServiceClient,
  upload: { readonly bucketId: string; readonly versionId: string },
): Promise<EngineError | undefined> {
  if (!isEngineError(error, 'not_found')) return undefined;
  let listed: boolean;
  try {
    listed = (await client.listVersions(upload.bucketId)).some((v) => v.id === upload.versionId);
  } catch (listing) {
    if (!isEngineError(listing, 'not_found')) return undefined;
    return new EngineError(
      'not_found',
      'the bucket this backup was sending to was deleted on the server (from this or another device) before all its data arrived; nothing of it is kept there',
      { cause: error },
    );
  }
  if (listed) return undefined;
  return new EngineError(
    'not_found',
    `version ${upload.versionId}, which this backup was sending, was deleted on the server (from this or another device) before all its data arrived; what it sent is not kept: run the backup again`,
    { cause: error },
  );
}
