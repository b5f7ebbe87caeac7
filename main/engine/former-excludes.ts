import { knownPathOf } from '../scanner/index.ts';
import {
  indexedSourceDirs,
  lastKnownActiveVersion,
  sourceDirIndexing,
  type StateDb,
} from '../state/index.ts';
import type { FormerExcludes } from '../uploader/index.ts';
import { keptExcludesOf } from './source-exclude-rules.ts';

// The exclude rules a folder takes over from the folder a bucket was backed up from before,
// once it replaces it as the source (`--replace-source`): the same folder renamed or moved, as
// a rule like `*.iso` or `cache/` is about what the folder holds, not where it lies. A folder
// with rules of its own keeps those.

/**
 * The rules kept for the folder whose file index here describes version `versionId` of bucket
 * `bucketId` (its active one), when that is another folder than `sourceDir` and has rules.
 */
export function formerExcludesOf(
  db: StateDb,
  bucketId: string,
  sourceDir: string,
  versionId: string,
): FormerExcludes | undefined {
  const dir = sourceDirIndexing(db, bucketId, versionId);
  if (dir === undefined || dir === sourceDir) return undefined;
  const rules = keptExcludesOf(db, dir);
  return rules.length === 0 ? undefined : { dir, rules };
}

/**
 * What a backup of `sourceDir` into the bucket named `bucket` replacing its source would take
 * over, as far as this computer knows without the service (a dry run): the active version as
 * last seen. None when the folder was backed up into that bucket here before.
 */
export function formerExcludesForPlan(
  db: StateDb,
  bucket: string,
  sourceDir: string,
): FormerExcludes | undefined {
  const known = lastKnownActiveVersion(db, bucket);
  if (!known) return undefined;
  const indexed = indexedSourceDirs(db, known.bucket_id);
  if (indexed.includes(knownPathOf(sourceDir, indexed))) return undefined;
  return formerExcludesOf(db, known.bucket_id, sourceDir, known.version_id);
}
