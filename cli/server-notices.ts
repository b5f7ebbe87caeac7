import { formatTime } from '../main/api/index.ts';
import type { Engine } from '../main/index.ts';
import type { Notification } from '../main/protocol/index.ts';

// The server's warnings and errors a backup has not shown before (a quota nearly full, blocks
// found damaged on the server's disk), shown after its result: a backup run by a timer is all
// most users see of Canopy. Each is shown once; `canopy notifications` lists them all.

export interface ServerNotices {
  readonly notices: readonly Notification[];
  /** Why they could not be fetched; the backup stands all the same, and the next one asks. */
  readonly failed?: string;
}

/** The notices not shown before, or why they could not be fetched. */
export async function takeServerNotices(engine: Engine): Promise<ServerNotices> {
  try {
    return { notices: await engine.unshownNotifications() };
  } catch (error) {
    // After a stored backup, a notice that cannot be fetched (the connection gone just then)
    // is no failure of the backup: said so, and the next backup asks again, as none was noted
    // shown.
    return { notices: [], failed: error instanceof Error ? error.message : String(error) };
  }
}

/** The lines for stderr telling `told`. */
export function serverNoticeLines(told: ServerNotices): string[] {
  return [
    ...told.notices.map(
      (notice) =>
        `canopy: the server's ${notice.severity} of ${formatTime(notice.created_at * 1000)}: ${notice.message} (\`canopy notifications\` lists it)`,
    ),
    ...(told.failed === undefined
      ? []
      : [`canopy: the server's notifications could not be fetched: ${told.failed}`]),
  ];
}
