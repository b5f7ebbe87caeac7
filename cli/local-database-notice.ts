import { formatTime } from '../main/api/index.ts';
import type { LocalService } from '../main/index.ts';

// What the user is told, once, when the embedded service found the database of their backups
// damaged on its disk and put the copy it keeps of it in its place
// (server/store/kept-database-copy.ts).

/** The line for stderr. */
export function localDatabaseNotice(
  restore: NonNullable<LocalService['restoredDatabase']>,
): string {
  return `the database of the backups was damaged: it is kept as ${restore.setAsideAs}, and the copy Canopy made of it at ${formatTime(restore.copyMadeAt)} is in its place; anything backed up after then is not in it, and the next backup of each folder sends it again`;
}
