// Progress of a backup or a restore in bytes and files (of a verify, in bytes and blocks), with
// an ETA from a smoothed rate of bytes. The rate is an exponentially weighted average over time
// (a half-life of a few seconds), so one slow or fast moment does not swing the estimate, and
// samples closer than SAMPLE_MS apart are merged.
//
// The rate is measured from the first sample that moved, not from the phase's start: the wait
// before a phase's first byte is no measure of its speed. A backup of 750 000 small files
// waited half a second for its first shard's first 59 bytes (the CAR header), and the rate
// taken over that wait said "about 96 h 41 min left" for a phase that took 50 s.

/** One phase's files and bytes, done and due. */
export interface CountedProgress<Phase extends string> {
  readonly phase: Phase;
  /** Files done and due; while scanning, both are the files found so far. */
  readonly filesDone: number;
  readonly filesTotal: number;
  /**
   * Bytes read from disk (reading), sent to the host (uploading) or written (restoring), and
   * how many are due; while scanning, both are the size of the files found so far.
   */
  readonly bytesDone: number;
  readonly bytesTotal: number;
  /** Seconds until this phase ends at the smoothed rate; null until a rate is known. */
  readonly etaSeconds: number | null;
}

/**
 * 'scanning': the source is walked and compared with the file index; 'pulling': the metadata
 * CAR of the version it builds on is fetched, when this computer keeps no copy of it (as a
 * restore's 'pulling'); 'reading': files are
 * read and packed; 'pushing': the version's metadata CAR (its tree of names, sizes and times)
 * goes to the service, its bytes counted, every file done; 'uploading': the shards go to the
 * host.
 */
export type BackupProgress = CountedProgress<
  'scanning' | 'pulling' | 'reading' | 'pushing' | 'uploading'
>;

/**
 * 'pulling': the version's metadata CAR (its list of files) is fetched, when this computer
 * keeps no copy of it; no file is known yet (0 of 0). 'restoring': the files a restore writes
 * (not those the target holds already) and their bytes, counted as they are written.
 */
export type RestoreProgress = CountedProgress<'pulling' | 'restoring'>;

/**
 * The blocks a verify fetches and checks, and their bytes as the version's tree states them;
 * before them ('pulling'), the version's metadata CAR it fetches afresh, its bytes received of
 * its size, no block known yet (0 of 0).
 */
export interface VerifyProgress {
  readonly phase: 'pulling' | 'verifying';
  /** Blocks answered so far, whole or not, and how many are asked for in all. */
  readonly blocksDone: number;
  readonly blocksTotal: number;
  /** Bytes of the blocks that came back whole, and of all the blocks asked for. */
  readonly bytesDone: number;
  readonly bytesTotal: number;
  /** Seconds until the check ends at the smoothed rate; null until a rate is known. */
  readonly etaSeconds: number | null;
}

const SAMPLE_MS = 250;

export class RateMeter {
  private readonly now: () => number;
  private readonly halfLifeMs: number;
  private last: { at: number; done: number } | undefined;
  /** Whether a sample has moved from the first: the rate is measured from the one that did. */
  private moving = false;
  private rate: number | undefined;

  constructor(now: () => number, halfLifeMs = 5000) {
    this.now = now;
    this.halfLifeMs = halfLifeMs;
  }

  /** Records that `done` units are done by now. */
  sample(done: number): void {
    const at = this.now();
    if (!this.last) {
      this.last = { at, done };
      return;
    }
    if (!this.moving) {
      // Still waiting for the first unit, or the first to move: it starts the measure.
      if (done !== this.last.done) this.moving = true;
      this.last = { at, done };
      return;
    }
    const elapsed = at - this.last.at;
    if (elapsed < SAMPLE_MS) return;
    const instant = (done - this.last.done) / elapsed;
    const weight = 1 - Math.pow(0.5, elapsed / this.halfLifeMs);
    this.rate = this.rate === undefined ? instant : this.rate + weight * (instant - this.rate);
    this.last = { at, done };
  }

  /** Units per second, smoothed; undefined before two samples far enough apart. */
  get perSecond(): number | undefined {
    return this.rate === undefined ? undefined : this.rate * 1000;
  }

  /** Seconds to do `remaining` more units at the smoothed rate. */
  etaSeconds(remaining: number): number | null {
    if (remaining <= 0) return 0;
    if (this.rate === undefined || this.rate <= 0) return null;
    return remaining / this.rate / 1000;
  }
}

/** Counts one phase's files and bytes and reports them, at most every REPORT_MS and at its end. */
export class PhaseProgress<Phase extends string> {
  private readonly meter: RateMeter;
  private filesDone: number;
  private bytesDone = 0;
  private lastReport = -Infinity;

  constructor(
    private readonly phase: Phase,
    private readonly filesTotal: number,
    private bytesTotal: number,
    private readonly report: (progress: CountedProgress<Phase>) => void,
    private readonly now: () => number,
    filesAlreadyDone = 0,
  ) {
    this.filesDone = filesAlreadyDone;
    this.meter = new RateMeter(now);
    this.meter.sample(0);
  }

  /** Adds to the bytes done (a negative amount takes back bytes of a failed attempt). */
  addBytes(count: number): void {
    this.bytesDone += count;
    this.meter.sample(this.bytesDone);
    this.maybeReport();
  }

  /** Adds bytes found to be done after all, which the total left out when it was counted. */
  addToTotal(count: number): void {
    this.bytesTotal += count;
  }

  addFile(): void {
    this.addFiles(1);
  }

  addFiles(count: number): void {
    this.filesDone += count;
    this.maybeReport();
  }

  finish(): void {
    this.emit();
  }

  private maybeReport(): void {
    if (this.now() - this.lastReport >= REPORT_MS) this.emit();
  }

  private emit(): void {
    this.lastReport = this.now();
    this.report({
      phase: this.phase,
      filesDone: this.filesDone,
      filesTotal: this.filesTotal,
      bytesDone: this.bytesDone,
      bytesTotal: this.bytesTotal,
      etaSeconds: this.meter.etaSeconds(this.bytesTotal - this.bytesDone),
    });
  }
}

const REPORT_MS = 200;

/**
 * Reports the pull of a version's metadata CAR as the 'pulling' phase of a restore or backup:
 * no file known yet, the CAR's bytes received of its size (of those received so far, while the
 * answer states no size). Takes the pull's reports (a retry starts again at 0).
 */
export function pullPhase(
  report: (progress: CountedProgress<'pulling'>) => void,
  now: () => number,
): (receivedThisAttempt: number, total: number | null) => void {
  let phase: PhaseProgress<'pulling'> | undefined;
  let receivedBefore = 0;
  return (received, total) => {
    phase ??= new PhaseProgress('pulling', 0, total ?? 0, report, now);
    const more = received - receivedBefore;
    receivedBefore = received;
    if (total === null) phase.addToTotal(more);
    phase.addBytes(more);
    if (received === total) phase.finish();
  };
}

/**
 * Reports the scan of a source: the files found so far and their size, at most every REPORT_MS
 * and at its end. A scan of 400 000 files takes seconds, and of a cold disk much longer: without
 * it, nothing moved until reading began. Its total is not known until it ends, so it has no ETA.
 */
export class ScanProgress {
  private files = 0;
  private bytes = 0;
  private lastReport = -Infinity;

  constructor(
    private readonly report: (progress: BackupProgress) => void,
    private readonly now: () => number,
  ) {}

  /** A file found, of `bytes`. */
  found(bytes: number): void {
    this.files += 1;
    this.bytes += bytes;
    if (this.now() - this.lastReport >= REPORT_MS) this.emit();
  }

  finish(): void {
    this.emit();
  }

  private emit(): void {
    this.lastReport = this.now();
    this.report({
      phase: 'scanning',
      filesDone: this.files,
      filesTotal: this.files,
      bytesDone: this.bytes,
      bytesTotal: this.bytes,
      etaSeconds: null,
    });
  }
}
