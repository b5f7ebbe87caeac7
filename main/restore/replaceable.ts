import { statSync, type Stats } from 'node:fs';
import path from 'node:path';

// What a restore with --overwrite may not replace, and why. In a folder with the sticky bit
// (/tmp, a household's or team's shared drop folder) only an entry's owner, the folder's owner
// or root may remove or rename it: another user's file there cannot be replaced. Nor can a file
// marked immutable or append-only (chattr +i, +a), not even by root; Node cannot read those
// flags, so such a file is known by the EPERM a rename over it gives. A restore that tried
// would fail part way with "permission denied" for a folder it may well write into; it
// restores beside it instead, as without --overwrite, and says why.

/** The sticky bit, S_ISVTX. */
const STICKY = 0o1000;

/** Why another user's entry in a sticky folder is not replaced. */
export const OTHERS_IN_STICKY_FOLDER =
  "another user's, in a shared folder where only they may replace it";

/** Why an entry the system would not let go of (EPERM) is not replaced. */
export const REPLACING_REFUSED =
  'the system would not let it be replaced (as for a file marked immutable: lsattr shows it)';

/** Whether this user may replace `existing`, what is at `file` now. */
export function mayReplace(file: string, existing: Stats): boolean {
  const uid = process.getuid?.();
  if (uid === undefined || uid === 0 || existing.uid === uid) return true;
  const folder = statSync(path.dirname(file));
  return (folder.mode & STICKY) === 0 || folder.uid === uid;
}
