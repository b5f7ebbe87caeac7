import { formatBytes, formatTime } from '../main/api/index.ts';
import type { BlockProblemKind, StoreCheck } from './blocks/store-check.ts';
import type { ServiceContext } from './context.ts';
import { holdersOf, type BlockHolder } from './store/block-refs.ts';
import { removeNotificationsByKey, raiseNotification } from './store/notifications.ts';

// What `canopy-server check` tells its operator, and with --notify each user whose backups
// hold blocks it found not whole: a verify of their buckets finds the blocks, and each
// bucket's next backup sends again what its folder still holds (the server replaces a stored
// copy that is not whole with the one sent).

/** The key of the notification --notify leaves, each check's replacing the one before. */
export const STORE_CHECK_KEY = 'stored_blocks_damaged';

/** What blocks of each kind are, told of one block, then of several. */
const KIND_WORDS: Readonly<Record<BlockProblemKind, readonly [string, string]>> = {
  damaged: [
    'damaged (its bytes no longer match its CID)',
    'damaged (their bytes no longer match their CIDs)',
  ],
  unreadable: [
    'unreadable (the disk failed to read it: an I/O error)',
    'unreadable (the disk failed to read them: an I/O error)',
  ],
  missing: ['missing (its file is gone)', 'missing (their file is gone)'],
  cut_short: [
    'cut short (its file ends before it does)',
    'cut short (their file ends before they do)',
  ],
};

function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** The users holding the blocks `check` found not whole. */
export function holdersOfProblems(ctx: ServiceContext, check: StoreCheck): BlockHolder[] {
  return holdersOf(ctx.db, [...new Set(check.problems.map((problem) => problem.cid))]);
}

/** Leaves each of `holders` a warning naming how many of their blocks are not whole. */
export function notifyHolders(ctx: ServiceContext, holders: readonly BlockHolder[]): void {
  const now = ctx.now();
  ctx.transact(() => {
    for (const holder of holders) {
      removeNotificationsByKey(ctx.db, holder.userId, STORE_CHECK_KEY);
      raiseNotification(
        ctx.db,
        {
          userId: holder.userId,
          messageKey: STORE_CHECK_KEY,
          severity: 'warning',
          dismissable: true,
          message: `A check of the server's disk on ${formatTime(now)} found ${plural(holder.blocks, 'block')} of your backups damaged or unreadable. Run \`canopy verify --bucket NAME --all\` for each of your buckets: the next backup of each sends again what its folder still holds of the blocks it finds.`,
        },
        now,
      );
    }
  });
}

/** The lines of the report for a person, the last one the verdict. */
export function checkReportLines(
  check: StoreCheck,
  seconds: number,
  holders: readonly BlockHolder[],
  notified: boolean,
): string[] {
  const lines: string[] = [];
  const byFile = new Map<string, Map<BlockProblemKind, number>>();
  for (const { file, kind } of check.problems) {
    const kinds = byFile.get(file) ?? new Map<BlockProblemKind, number>();
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    byFile.set(file, kinds);
  }
  for (const [file, kinds] of byFile)
    for (const [kind, count] of kinds)
      lines.push(`${file}: ${plural(count, 'block')} ${KIND_WORDS[kind][count === 1 ? 0 : 1]}`);
  for (const [file, count] of check.chunkProblems)
    lines.push(
      `${file}: ${plural(count, 'metadata chunk')} damaged or unreadable (a backup that names them again stores them anew)`,
    );
  const checked = `checked ${plural(check.blocks, 'block')} (${formatBytes(check.bytes)}) and ${plural(check.chunks, 'metadata chunk')} (${formatBytes(check.chunkBytes)}) in ${seconds.toFixed(1)} s`;
  const badChunks = [...check.chunkProblems.values()].reduce((sum, count) => sum + count, 0);
  if (check.problems.length === 0 && badChunks === 0) {
    lines.push(`${checked}: all whole`);
    return lines;
  }
  const bad = [
    ...(check.problems.length > 0 ? [plural(check.problems.length, 'block')] : []),
    ...(badChunks > 0 ? [plural(badChunks, 'metadata chunk')] : []),
  ];
  lines.push(`${checked}: ${bad.join(' and ')} not whole`);
  if (holders.length > 0)
    lines.push(
      `held by ${holders.map((holder) => `${holder.email} (${plural(holder.blocks, 'block')})`).join(', ')}: \`canopy verify --bucket NAME --all\` of each of their buckets finds those it needs, and the bucket's next backup sends them again from what its folder still holds; ${notified ? 'each was told so in a notification' : '--notify tells each of them so'}`,
    );
  return lines;
}
