import type { BackupProgress, RestoreProgress } from '../main/index.ts';
import { progressLine } from './progress-line.ts';

// Shows a backup's or a restore's progress on stderr: on a terminal as one line rewritten in
// place, elsewhere (when asked, with --progress) as a line every few seconds and at the end of
// each phase, so a log holds a readable trail rather than hundreds of lines.

type Progress = BackupProgress | RestoreProgress;

/** Lines printed off a terminal are at least this far apart, but for a phase's last. */
const LOG_LINE_MS = 2000;

export interface ProgressPrinter {
  /** Takes the progress reports; undefined when none are shown. */
  readonly onProgress: ((progress: Progress) => void) | undefined;
  /** Clears the terminal's progress line, before the result or an error is printed. */
  done(): void;
}

export function progressPrinter(terminal: boolean, asked: boolean): ProgressPrinter {
  if (!terminal && !asked) return { onProgress: undefined, done: () => undefined };
  let lastLine = 0;
  let shown = false;
  return {
    onProgress: (progress) => {
      const line = progressLine(progress);
      if (terminal) {
        process.stderr.write(`\r${line}\x1b[K`);
        shown = true;
        return;
      }
      // A scan's counts are always its totals so far: it is never seen to end.
      const phaseEnded =
        progress.phase !== 'scanning' &&
        progress.bytesDone === progress.bytesTotal &&
        progress.filesDone === progress.filesTotal;
      if (!phaseEnded && Date.now() - lastLine < LOG_LINE_MS) return;
      lastLine = Date.now();
      process.stderr.write(`${line}\n`);
    },
    done: () => {
      if (shown) process.stderr.write('\r\x1b[K');
      shown = false;
    },
  };
}
