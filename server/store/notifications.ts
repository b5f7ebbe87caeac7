import { newUuid, type Notification, type Severity } from '../../main/protocol/index.ts';
import type { Db } from './database.ts';
import { sql } from './statements.ts';

// §13.3: the keys the service raises itself. The administrator may post others.
export type MessageKey =
  | 'device_key_added'
  | 'storage_quota_80'
  | 'storage_quota_100'
  | 'upload_window_expired'
  | 'bucket_deleted'
  // Posted by `canopy-server check --notify`, as an administrator may post others.
  | 'stored_blocks_damaged';

interface NotificationRow {
  id: string;
  user_id: string;
  dismissable: number;
  message: string;
  message_key: string;
  severity: Severity;
  created_at: number;
}

export interface RaiseNotification {
  readonly userId: string;
  readonly messageKey: string;
  readonly severity: Severity;
  readonly dismissable: boolean;
  readonly message: string;
}

export function raiseNotification(db: Db, input: RaiseNotification, now: number): string {
  const id = newUuid();
  sql(
    db,
    `INSERT INTO notifications (id, user_id, dismissable, message, message_key, severity, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    id,
    input.userId,
    input.dismissable ? 1 : 0,
    input.message,
    input.messageKey,
    input.severity,
    now,
  );
  return id;
}

export function removeNotificationsByKey(db: Db, userId: string, messageKey: MessageKey): void {
  sql(db, 'DELETE FROM notifications WHERE user_id = ? AND message_key = ?').run(
    userId,
    messageKey,
  );
}

function toDto(row: NotificationRow): Notification {
  return {
    id: row.id,
    user_id: row.user_id,
    dismissable: row.dismissable === 1,
    message: row.message,
    message_key: row.message_key,
    severity: row.severity,
    created_at: Math.floor(row.created_at / 1000),
  };
}

export function listNotifications(db: Db, userId: string): Notification[] {
  return sql<[string], NotificationRow>(
    db,
    'SELECT * FROM notifications WHERE user_id = ? ORDER BY seq DESC',
  )
    .all(userId)
    .map(toDto);
}

export function findNotification(db: Db, userId: string, id: string): Notification | undefined {
  const row = sql<[string, string], NotificationRow>(
    db,
    'SELECT * FROM notifications WHERE user_id = ? AND id = ?',
  ).get(userId, id);
  return row ? toDto(row) : undefined;
}

export function deleteNotification(db: Db, id: string): void {
  sql(db, 'DELETE FROM notifications WHERE id = ?').run(id);
}
