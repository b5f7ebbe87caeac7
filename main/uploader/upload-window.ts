import { EngineError, isEngineError } from '../api/index.ts';
import { decodeCompactJws } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';

// A pushed version takes shards only within its upload window (§10.2: 24 h by default, from
// the push). An upload nearing the window's end goes on as a new version (windowState), so an
// upload of any length gets there a window at a time. Past the end, the version is
// `upload_failed`, its storage authorization stops working, and the host answers its shards
// 409 (the version is not pending) or, once the authorization's own expiry (whole seconds)
// has passed too, 401, which on its own reads as a device the service no longer accepts. Such
// a backup is told so, with what to do: what it sent is no longer held for it.

/** The window as the storage authorization states it (seconds); undefined if it does not. */
function windowOf(storageAuthorization: string): { iat: number; exp: number } | undefined {
  const claims = decodeCompactJws(storageAuthorization)?.claims;
  const iat = claims?.['iat'];
  const exp = claims?.['exp'];
  return typeof iat === 'number' && typeof exp === 'number' && exp > iat ? { iat, exp } : undefined;
}

function windowSecondsOf(storageAuthorization: string): number | undefined {
  const window = windowOf(storageAuthorization);
  return window && window.exp - window.iat;
}

/**
 * Where an upload stands in its window before its next shard: `ending` when the window ends
 * within a quarter of its length, or within three times the slowest shard so far; `over` once
 * it has ended (the process was suspended, or a shard took longer than the margin). An ending
 * upload moves to a new push of the same tree, which has a window of its own and finds the
 * blocks this one received held (a pending version holds its blocks, §11.3), so it sends only
 * the rest. An upload past its window holds nothing any more.
 *
 * `cheapRenewal`: going on as a new version reads nothing again (the same metadata CAR pushed
 * again), so the upload moves on once half its window has passed. A laptop asleep through the
 * end of a window loses what the version received; with half a day of margin, a night's sleep
 * does not reach it. Otherwise (the source would be packed anew, reading every file) only
 * near the end.
 */
export function windowState(
  storageAuthorization: string,
  nowMs: number,
  slowestShardMs: number,
  cheapRenewal = false,
): 'open' | 'ending' | 'over' {
  const window = windowOf(storageAuthorization);
  if (!window) return 'open';
  const leftMs = window.exp * 1000 - nowMs;
  if (leftMs <= 0) return 'over';
  const lengthMs = (window.exp - window.iat) * 1000;
  const marginMs = cheapRenewal
    ? lengthMs / 2
    : Math.min(lengthMs / 2, Math.max(lengthMs / 4, 3 * slowestShardMs));
  return leftMs < marginMs ? 'ending' : 'open';
}

/**
 * The upload of `versionId` stopped before its window ends, to go on as a new version: the
 * same tree pushed again, or the source packed anew, and `versionId`, still pending and holding
 * what it received, is deleted once the new version's upload is queued.
 */
export class WindowEnding extends Error {
  constructor(
    readonly versionId: string,
    /**
     * Shards of this upload confirmed, by this run or one before: none means a window is too
     * short for any progress.
     */
    readonly confirmed: number,
    readonly storageAuthorization: string,
    /** The shards' bytes this upload sent. */
    readonly sentBytes: number,
  ) {
    super(`the upload window of version ${versionId} ends soon`);
    this.name = 'WindowEnding';
  }
}

function durationText(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

/**
 * Whether `error`, from sending version `versionId`'s shards or completing it, is its upload
 * window ending: a 401 or 409 while the service lists the version as `upload_failed`, or no
 * longer lists it at all once the window its storage authorization states has ended (a failed
 * version is deleted after its retention, §10.2: an upload stalled that long, or on a server
 * that keeps failed versions briefly). The service answering this device's own request shows
 * that the 401 was not about the device.
 */
export async function isUploadWindowOver(
  error: unknown,
  client: ServiceClient,
  upload: {
    readonly bucketId: string;
    readonly versionId: string;
    readonly storageAuthorization: string;
  },
): Promise<boolean> {
  if (!isEngineError(error, 'not_authorized') && !isEngineError(error, 'conflict')) return false;
  try {
    const version = (await client.listVersions(upload.bucketId)).find(
      (v) => v.id === upload.versionId,
    );
    if (version) return version.state === 'upload_failed';
    return windowState(upload.storageAuthorization, client.serverNow(), 0) === 'over';
  } catch {
    // The service does not answer this device either (a 401 about the device itself): the
    // caller reports the error as it came.
    return false;
  }
}

/**
 * The user's error for an upload that outlasted its window: one that passed its end unseen (a
 * computer asleep, a connection stalled), or, `tooLarge`, one whose packing and push took so
 * much of a window that no shard went in it.
 */
export function uploadWindowOver(
  storageAuthorization: string,
  cause: unknown,
  tooLarge = false,
): EngineError {
  const seconds = windowSecondsOf(storageAuthorization);
  const window =
    seconds === undefined ? 'its upload window' : `its ${durationText(seconds)} upload window`;
  const what = tooLarge
    ? 'and preparing this backup took most of it: back up less at once (exclude some folders, or back up a few subfolders to their own buckets first)'
    : 'which ended before the rest could be sent (the computer asleep, or the connection stalled, past its end); what was sent is no longer kept for it: run the backup again';
  return new EngineError(
    'upload_window_over',
    `the server takes this backup's data only within ${window}, ${what}`,
    { cause },
  );
}

/** The upload's window had ended before its next shard: what it sent is not held for it. */
export class WindowOver extends Error {
  constructor() {
    super('the upload window has ended');
    this.name = 'WindowOver';
  }
}
