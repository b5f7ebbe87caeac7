import { formatBytes } from '../main/api/index.ts';

// The progress of `canopy-server check` on a terminal: one line on stderr, rewritten in place
// at most once a second, so that a check of a few hundred GB on a slow disk, which takes hours,
// says how far it is and how long it has left; cleared before the report.

/** The line is rewritten at most this often. */
const EVERY_MS = 1000;

/** How long `seconds` is, in the words of a line of progress. */
function timeLeft(seconds: number): string {
  if (seconds < 90) return `about ${Math.max(1, Math.round(seconds))} s left`;
  if (seconds < 90 * 60) return `about ${Math.round(seconds / 60)} min left`;
  return `about ${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min left`;
}

/**
 * The line for `done` bytes checked of the `stored` there were when the check began, `elapsedMs`
 * after it began.
 */
export function checkProgressLine(done: number, stored: number, elapsedMs: number): string {
  // What backups beside the check stored since it began, and blocks a compaction moved into a
  // new pack (checked again there), are read too: the line never tells more than all of it.
  const total = Math.max(stored, done);
  const percent = total === 0 ? 100 : Math.floor((done / total) * 100);
  const left =
    done === 0 || elapsedMs < EVERY_MS
      ? 'estimating time left'
      : timeLeft(((total - done) * elapsedMs) / done / 1000);
  return `checking: ${formatBytes(done)} of ${formatBytes(total)} read back (${percent}%), ${left}`;
}

/** Shows the progress of a check of `total` bytes with `write`; `done` clears it. */
export function checkProgress(
  total: number,
  write: (text: string) => void,
  now: () => number = () => performance.now(),
): { readonly onProgress: (done: number) => void; readonly done: () => void } {
  const started = now();
  let shownAt = started;
  write(checkProgressLine(0, total, 0));
  return {
    onProgress: (done) => {
      const at = now();
      if (at - shownAt < EVERY_MS) return;
      shownAt = at;
      write(`\r\x1b[K${checkProgressLine(done, total, at - started)}`);
    },
    done: () => {
      write('\r\x1b[K');
    },
  };
}
