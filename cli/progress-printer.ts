// Shows a backup's, a restore's or a verify's progress on stderr: on a terminal as one line
// rewritten in place, elsewhere (when asked, with --progress) as a line every few seconds and
// at the end of each phase, so a log holds a readable trail rather than hundreds of lines.

/** Lines printed off a terminal are at least this far apart, but for a phase's last. */
const LOG_LINE_MS = 2000;

/** How one kind of progress report is shown. */
export interface ProgressView<Progress> {
  line(progress: Progress): string;
  /** Whether it is its phase's last report, printed however soon after the one before. */
  ended(progress: Progress): boolean;
  /**
   * The report's phase, where there are several: off a terminal, a phase whose last report
   * cannot tell it is the last (a scan's) has it printed once the next phase starts.
   */
  phase?(progress: Progress): string;
}

export interface ProgressPrinter<Progress> {
  /** Takes the progress reports; undefined when none are shown. */
  readonly onProgress: ((progress: Progress) => void) | undefined;
  /** Clears the terminal's progress line, before the result or an error is printed. */
  done(): void;
}

/**
 * `line` cut to fit one row of a terminal `columns` wide (undefined or 0: unknown, as it is
 * left). A line longer than its row wraps onto the next, which the next report's carriage
 * return does not reach: each report then added a row, and the terminal scrolled with them. The
 * last column stays empty, as some terminals wrap on filling it. The lines are ASCII: a char is
 * a column.
 */
export function fitted(line: string, columns: number | undefined): string {
  if (columns === undefined || columns < 2 || line.length < columns) return line;
  return `${line.slice(0, columns - 2)}…`;
}

export function progressPrinter<Progress>(
  terminal: boolean,
  asked: boolean,
  view: ProgressView<Progress>,
): ProgressPrinter<Progress> {
  if (!terminal && !asked) return { onProgress: undefined, done: () => undefined };
  let lastLine = 0;
  let shown = false;
  /** Off a terminal, the last report not printed, and its phase. */
  let skipped: { readonly line: string; readonly phase: string | undefined } | undefined;
  const printSkipped = (): void => {
    if (skipped) process.stderr.write(`${skipped.line}\n`);
    skipped = undefined;
  };
  return {
    onProgress: (progress) => {
      const line = view.line(progress);
      if (terminal) {
        process.stderr.write(`\r${fitted(line, process.stderr.columns)}\x1b[K`);
        shown = true;
        return;
      }
      const phase = view.phase?.(progress);
      if (skipped && skipped.phase !== phase) printSkipped();
      if (!view.ended(progress) && Date.now() - lastLine < LOG_LINE_MS) {
        skipped = { line, phase };
        return;
      }
      skipped = undefined;
      lastLine = Date.now();
      process.stderr.write(`${line}\n`);
    },
    done: () => {
      // Where the operation got to, in a log: its last report, if it was not printed.
      printSkipped();
      if (shown) process.stderr.write('\r\x1b[K');
      shown = false;
    },
  };
}
