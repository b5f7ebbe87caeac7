import type { Notification } from '../protocol/index.ts';
import type { StateDb } from './database.ts';

// The server's notifications of weight (a warning or an error: a quota nearly full, blocks
// found damaged on its disk, an upload window that expired) reach a user who runs Canopy from
// a timer only if a command shows them: so a backup shows each one once, the first time it sees
// it, and `canopy notifications` lists them all. Which were shown is kept here, by id; ids the
// server no longer lists (dismissed) are forgotten, so the table holds no more than the server
// does.

/** Severities shown after a backup; 'info' (a device linked) only in `canopy notifications`. */
const SHOWN_SEVERITIES: ReadonlySet<string> = new Set(['warning', 'error']);

/**
 * Of `listed` (all the server lists now), the warnings and errors not shown before, oldest
 * first, noted as shown from now on.
 */
export function takeUnshownNotifications(
  db: StateDb,
  listed: readonly Notification[],
  now: number,
): Notification[] {
  return db.transaction(() => {
    const shown = new Set(
      db.prepare<[], string>('SELECT id FROM shown_notifications').pluck().all(),
    );
    const listedIds = new Set(listed.map((notification) => notification.id));
    const forget = db.prepare('DELETE FROM shown_notifications WHERE id = ?');
    for (const id of shown) if (!listedIds.has(id)) forget.run(id);
    const fresh = listed
      .filter((notification) => SHOWN_SEVERITIES.has(notification.severity))
      .filter((notification) => !shown.has(notification.id))
      .sort((a, b) => a.created_at - b.created_at);
    const note = db.prepare('INSERT INTO shown_notifications (id, shown_at) VALUES (?, ?)');
    for (const notification of fresh) note.run(notification.id, now);
    return fresh;
  })();
}
