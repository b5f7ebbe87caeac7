import type { Db } from './database.ts';
import { raiseNotification, removeNotificationsByKey } from './notifications.ts';
import { sql } from './statements.ts';
import { requireUser } from './users.ts';

// Usage (§11.6) and the quota notifications of §13.3.

export function usageOf(db: Db, userId: string): number {
  const user = requireUser(db, userId);
  const row = sql<[string], { cars: number | null; outstanding: number | null }>(
    db,
    `SELECT
       SUM(CASE WHEN state IN ('pending', 'active', 'outdated', 'upload_failed') THEN car_bytes ELSE 0 END) AS cars,
       SUM(CASE WHEN state = 'pending' THEN expected_data_size - received_total ELSE 0 END) AS outstanding
     FROM versions WHERE user_id = ? AND state != 'deleted'`,
  ).get(userId);
  return user.data_bytes + (row?.cars ?? 0) + (row?.outstanding ?? 0);
}

/** Re-evaluates the two quota flags after any change to usage or quota. */
export function evaluateQuota(db: Db, userId: string, now: number): void {
  const user = requireUser(db, userId);
  const usage = usageOf(db, userId);
  const quota = user.quota_bytes;
  const reaches = (fraction: number): boolean => quota !== null && usage >= quota * fraction;
  const percent = quota ? Math.floor((usage / quota) * 100) : 0;

  if (reaches(0.8) && user.above_80 === 0) {
    sql(db, 'UPDATE users SET above_80 = 1 WHERE id = ?').run(userId);
    raiseNotification(
      db,
      {
        userId,
        messageKey: 'storage_quota_80',
        severity: 'warning',
        dismissable: true,
        message: `You have used ${percent}% of your storage quota.`,
      },
      now,
    );
  } else if (!reaches(0.8) && user.above_80 === 1) {
    sql(db, 'UPDATE users SET above_80 = 0 WHERE id = ?').run(userId);
  }

  if (reaches(1) && user.above_100 === 0) {
    sql(db, 'UPDATE users SET above_100 = 1 WHERE id = ?').run(userId);
    raiseNotification(
      db,
      {
        userId,
        messageKey: 'storage_quota_100',
        severity: 'error',
        dismissable: false,
        message: 'Your storage quota is full. New backups will be refused until space is freed.',
      },
      now,
    );
  } else if (!reaches(1) && user.above_100 === 1) {
    sql(db, 'UPDATE users SET above_100 = 0 WHERE id = ?').run(userId);
    removeNotificationsByKey(db, userId, 'storage_quota_100');
  }
}
