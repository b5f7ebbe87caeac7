import { EngineError, isEngineError } from '../api/index.ts';
import { decodeCompactJws } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';

// A pushed version takes shards only within its upload window (§10.2: 24 h by default, from the
// push). Past it, the version is `upload_failed`, its storage authorization stops working, and
// the host answers its shards 409 (the version is not pending) or, once the authorization's
// own expiry (whole seconds) has passed too, 401, which on its own reads as a device the
// service no longer accepts. A backup whose upload outlasts the window (hundreds of GB over a slow uplink) is
// told so, with what to do: what it sent is no longer held for it, and sending it all again
// would outlast the window again.

/** The window's length in seconds, as the storage authorization states it; undefined if not. */
function windowSecondsOf(storageAuthorization: string): number | undefined {
  const claims = decodeCompactJws(storageAuthorization)?.claims;
  const iat = claims?.['iat'];
  const exp = claims?.['exp'];
  return typeof iat === 'number' && typeof exp === 'number' && exp > iat ? exp - iat : undefined;
}

function durationText(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

/**
 * Whether `error`, from sending version `versionId`'s shards or completing it, is its upload
 * window ending: a 401 or 409 while the service lists the version as `upload_failed`.
 */
export async function isUploadWindowOver(
  error: unknown,
  client: ServiceClient,
  bucketId: string,
  versionId: string,
): Promise<boolean> {
  if (!isEngineError(error, 'not_authorized') && !isEngineError(error, 'conflict')) return false;
  try {
    const version = (await client.listVersions(bucketId)).find((v) => v.id === versionId);
    return version?.state === 'upload_failed';
  } catch {
    // The service does not answer this device either (a 401 about the device itself): the
    // caller reports the error as it came.
    return false;
  }
}

/** The user's error for an upload that outlasted its window. */
export function uploadWindowOver(storageAuthorization: string, cause: unknown): EngineError {
  const seconds = windowSecondsOf(storageAuthorization);
  const window =
    seconds === undefined ? 'its upload window' : `its ${durationText(seconds)} upload window`;
  return new EngineError(
    'upload_window_over',
    `the server took this backup's data only within ${window}, which ended before all of it was sent; what was sent is no longer kept for it. Back up less at once (exclude some folders, or back up a few subfolders to their own buckets first), so that each backup's upload ends within the window`,
    { cause },
  );
}
