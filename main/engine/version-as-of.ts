import { EngineError, formatTime, type EngineErrorCode } from '../api/index.ts';
import type { Metadata } from '../protocol/index.ts';
import type { BucketVersions } from './bucket-versions.ts';
import { isStored } from './version-comparison.ts';

// The version of a bucket as it was at a time the user names (`--at 2026-11-20`): people
// remember when a file was still right, not the id of a version. It is the newest version
// stored whole that was made at that time or before; one made later, or still uploading, is
// not what the folder held then. From the list as last seen while the service cannot be
// reached, as `canopy versions` shows it.

/** The version a bucket held at a time, and whether the list it was chosen from is current. */
export interface VersionAsOf {
  readonly version: Metadata;
  /** When the list it was chosen from was seen; null when the service listed it now. */
  readonly offlineSince: number | null;
  readonly offlineBecause: EngineErrorCode | null;
}

/** The newest of `versions` stored whole and made at `atMs` or before; undefined for none. */
export function versionMadeBy(versions: readonly Metadata[], atMs: number): Metadata | undefined {
  let chosen: Metadata | undefined;
  for (const version of versions) {
    if (!isStored(version) || version.created_at * 1000 > atMs) continue;
    // Made in the same second, the one listed first is the newer: the list is newest first.
    if (!chosen || version.created_at > chosen.created_at) chosen = version;
  }
  return chosen;
}

export async function versionAsOf(
  versions: BucketVersions,
  input: { readonly bucket: string; readonly atMs: number },
): Promise<VersionAsOf> {
  const listed = await versions.orLastSeen({ bucket: input.bucket });
  const version = versionMadeBy(listed.versions, input.atMs);
  if (!version) {
    const stored = listed.versions.filter(isStored);
    const oldest = stored.reduce((least, kept) => Math.min(least, kept.created_at), Infinity);
    throw new EngineError(
      'not_found',
      stored.length === 0
        ? `bucket "${input.bucket}" has no version yet`
        : `bucket "${input.bucket}" has no version from ${formatTime(input.atMs)} or before: its oldest is from ${formatTime(oldest * 1000)}`,
    );
  }
  return { version, offlineSince: listed.offlineSince, offlineBecause: listed.offlineBecause };
}
