import type {
  BackupProgress,
  HistoryProgress,
  RestoreProgress,
  VerifyProgress,
} from '../main/index.ts';
import { formatBytes } from '../main/api/index.ts';
import { counted } from './counted.ts';
import type { ProgressView } from './progress-printer.ts';

// One line of a backup's, a restore's or a verify's progress for a terminal: the phase, files
// (or blocks), bytes and an ETA in words.

/** Rounded the way people say it: "under a minute" would hide that it is nearly done. */
export function formatEta(seconds: number | null): string {
  if (seconds === null) return 'estimating time left';
  if (seconds < 1) return 'almost done';
  if (seconds < 90) return `about ${Math.round(seconds)} s left`;
  if (seconds < 90 * 60) return `about ${Math.round(seconds / 60)} min left`;
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.round((seconds % 3600) / 60);
  return `about ${hours} h ${minutes} min left`;
}

export function progressLine(progress: BackupProgress | RestoreProgress): string {
  if (progress.phase === 'scanning') {
    const files = counted(progress.filesDone, 'file');
    return `scanning: ${files}, ${formatBytes(progress.bytesDone)} found`;
  }
  const bytes = `${formatBytes(progress.bytesDone)} of ${formatBytes(progress.bytesTotal)}`;
  // What goes or comes then is the list of the files, which a user would not call files.
  if (progress.phase === 'pushing')
    return `sending the list of files: ${bytes}, ${formatEta(progress.etaSeconds)}`;
  if (progress.phase === 'pulling')
    return `fetching the list of files: ${bytes}, ${formatEta(progress.etaSeconds)}`;
  // Shards read again to leave out what the server holds: no file of the user's is counted, and
  // the bytes are those read again, not those left out.
  if (progress.phase === 'trimming')
    return `leaving out what the server holds already, reading the rest again: ${bytes}, ${formatEta(progress.etaSeconds)}`;
  if (progress.phase === 'opening')
    return `reading the list of files: ${bytes}, ${formatEta(progress.etaSeconds)}`;
  if (progress.phase === 'checking')
    return `reading back what a stopped restore part-wrote: ${progress.filesDone}/${progress.filesTotal} files, ${bytes}, ${formatEta(progress.etaSeconds)}`;
  // A listing reads no file's bytes: its entries are what it goes through.
  if (progress.phase === 'listing')
    return `listing: ${progress.filesDone}/${progress.filesTotal} entries, ${formatEta(progress.etaSeconds)}`;
  const files = `${progress.filesDone}/${progress.filesTotal} files`;
  return `${progress.phase}: ${files}, ${bytes}, ${formatEta(progress.etaSeconds)}`;
}

/** Whether `progress` is its phase's last report. A scan's counts are always its totals so far. */
export function isPhaseEnd(progress: BackupProgress | RestoreProgress): boolean {
  return (
    progress.phase !== 'scanning' &&
    progress.bytesDone === progress.bytesTotal &&
    progress.filesDone === progress.filesTotal
  );
}

export function verifyProgressLine(progress: VerifyProgress): string {
  if (progress.phase === 'pulling' || progress.phase === 'opening') {
    const doing = progress.phase === 'pulling' ? 'fetching' : 'reading';
    return `${doing} the list of files: ${formatBytes(progress.bytesDone)} of ${formatBytes(progress.bytesTotal)}, ${formatEta(progress.etaSeconds)}`;
  }
  const blocks = `${progress.blocksDone}/${progress.blocksTotal} blocks`;
  const bytes = `${formatBytes(progress.bytesDone)} of ${formatBytes(progress.bytesTotal)}`;
  return `verifying: ${blocks}, ${bytes}, ${formatEta(progress.etaSeconds)}`;
}

/** Whether `progress` is a verify's last report. */
export function isVerifyEnd(progress: VerifyProgress): boolean {
  if (progress.phase !== 'verifying') return progress.bytesDone === progress.bytesTotal;
  return progress.blocksDone === progress.blocksTotal;
}

/** How a backup's, a restore's or a browse's progress is shown (progress-printer.ts). */
export const PHASE_PROGRESS: ProgressView<BackupProgress | RestoreProgress> = {
  line: progressLine,
  ended: isPhaseEnd,
  phase: (progress) => progress.phase,
};

/** How a verify's progress is shown. */
export const VERIFY_PROGRESS: ProgressView<VerifyProgress> = {
  line: verifyProgressLine,
  ended: isVerifyEnd,
  phase: (progress) => progress.phase,
};

/**
 * How a history's progress is shown: the versions read, and the fetch of the next one's list of
 * files when this computer keeps no copy of it.
 */
export const HISTORY_PROGRESS: ProgressView<HistoryProgress> = {
  line: ({ versionsDone, versionsTotal, pulling }) =>
    `reading versions: ${versionsDone}/${versionsTotal}${pulling ? `, ${progressLine(pulling)}` : ''}`,
  ended: (progress) => progress.versionsDone === progress.versionsTotal,
};

/**
 * `view`, whose lines in the phases that send or receive (`paced`) say the limit they keep to
 * (`--limit-upload`, `--limit-download`): a transfer slower than the link is then not taken
 * for a slow link. `view` itself without a limit.
 */
export function withLimitShown<Progress extends { readonly phase: string }>(
  view: ProgressView<Progress>,
  paced: readonly Progress['phase'][],
  bytesPerSecond: number | undefined,
): ProgressView<Progress> {
  if (bytesPerSecond === undefined) return view;
  const limit = `at most ${formatBytes(bytesPerSecond)}/s`;
  return {
    ...view,
    line: (progress) =>
      paced.includes(progress.phase) ? `${view.line(progress)}, ${limit}` : view.line(progress),
  };
}
