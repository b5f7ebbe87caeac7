import { statSync, type Stats } from 'node:fs';
import path from 'node:path';

// In a folder with the sticky bit (/tmp, a household's or team's shared drop folder) only an
// entry's owner, the folder's owner or root may remove or rename it: another user's file there
// cannot be replaced, not even with --overwrite. A restore that tried would fail part way with
// "permission denied" for a folder it may well write into; it restores beside it instead, as
// without --overwrite, and says so.

/** The sticky bit, S_ISVTX. */
const STICKY = 0o1000;

/** Whether this user may replace `existing`, what is at `file` now. */
export function mayReplace(file: string, existing: Stats): boolean {
  const uid = process.getuid?.();
  if (uid === undefined || uid === 0 || existing.uid === uid) return true;
  const folder = statSync(path.dirname(file));
  return (folder.mode & STICKY) === 0 || folder.uid === uid;
}
