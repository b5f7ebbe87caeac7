// Progress of a backup or a restore in bytes and files (of a verify, in bytes and blocks), with
// an ETA from what the phase's files and bytes have cost so far (work-meter.ts).

import type { CarFileReading } from './previous-tree.ts';
import { WorkMeter } from './work-meter.ts';

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
  /** Seconds until this phase ends at the costs measured so far; null until they are known. */
  readonly etaSeconds: number | null;
}

/**
 * 'scanning': the source is walked and compared with the file index; 'pulling': the metadata
 * CAR of the version it builds on is fetched, when this computer keeps no copy of it (as a
 * restore's 'pulling'); 'reading': files are
 * read and packed; 'pushing': the version's metadata CAR (its tree of names, sizes and times)
 * goes to the service, its bytes counted, every file done; 'trimming': the shards holding data
 * the host said it holds already are made again without it, the shards as files and the bytes
 * read to make them (held-blocks.ts), when there are any; 'uploading': the shards go to the host.
 */
export type BackupProgress = CountedProgress<
  'scanning' | 'pulling' | 'reading' | 'pushing' | 'trimming' | 'uploading'
>;

/**
 * 'pulling': the version's metadata CAR (its list of files) is fetched, when this computer
 * keeps no copy of it; no file is known yet (0 of 0). 'opening': that CAR is read from this
 * computer's copy and checked, its bytes read of its size, when that takes long enough to be
 * seen (openingPhase). 'restoring': the files a restore writes (not those the target holds
 * already) and their bytes, counted as they are written; before them, 'checking': the
 * part-written files a stopped restore left, which it goes on with, read back (part-files.ts).
 * 'listing', a listing's instead (`canopy ls -R`): the entries it goes through, files, folders
 * and links, as files, and no byte (listingPhase).
 */
export type RestoreProgress = CountedProgress<
  'pulling' | 'opening' | 'listing' | 'checking' | 'restoring'
>;

/**
 * The blocks a verify fetches and checks, and their bytes as the version's tree states them;
 * before them ('pulling'), the version's metadata CAR it fetches afresh, its bytes received of
 * its size, no block known yet (0 of 0).
 */
export interface VerifyProgress {
  /** 'opening': the pulled CAR read and checked, as a restore's (RestoreProgress). */
  readonly phase: 'pulling' | 'opening' | 'verifying';
  /** Blocks answered so far, whole or not, and how many are asked for in all. */
  readonly blocksDone: number;
  readonly blocksTotal: number;
  /** Bytes of the blocks that came back whole, and of all the blocks asked for. */
  readonly bytesDone: number;
  readonly bytesTotal: number;
  /** Seconds until the check ends at the costs measured so far; null until they are known. */
  readonly etaSeconds: number | null;
}

/** Counts one phase's files and bytes and reports them, at most every REPORT_MS and at its end. */
export class PhaseProgress<Phase extends string> {
  private readonly meter: WorkMeter;
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
    this.meter = new WorkMeter(now, filesTotal - filesAlreadyDone, bytesTotal);
    this.meter.sample(this.filesDone, 0);
  }

  /** Adds to the bytes done (a negative amount takes back bytes of a failed attempt). */
  addBytes(count: number): void {
    this.bytesDone += count;
    this.meter.sample(this.filesDone, this.bytesDone);
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
    this.meter.sample(this.filesDone, this.bytesDone);
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
      etaSeconds: this.meter.etaSeconds(
        this.filesTotal - this.filesDone,
        this.bytesTotal - this.bytesDone,
      ),
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
 * How long reading a version's list of files, or listing it, takes before it is told: a small
 * tree's is read before anyone could read a line about it, and a log would hold one for every
 * restore.
 */
const SHOWN_AFTER_MS = 500;

/** `report`, from SHOWN_AFTER_MS after now on. */
function toldOnceLong<Progress>(
  report: (progress: Progress) => void,
  now: () => number,
): (progress: Progress) => void {
  const startedAt = now();
  let shown = false;
  return (progress) => {
    shown ||= now() - startedAt >= SHOWN_AFTER_MS;
    if (shown) report(progress);
  };
}

/**
 * Reports the read of a version's metadata CAR from this computer's copy (readTreeIndexOfFile)
 * as the 'opening' phase of a restore: no file known yet, the CAR's bytes read of its size.
 * Told from SHOWN_AFTER_MS on: a restore of 300 000 files read its list for over 2 s,
 * and then counted what it was to write, before its first line.
 */
export function openingPhase(
  report: (progress: CountedProgress<'opening'>) => void,
  now: () => number,
): CarFileReading {
  const told = toldOnceLong(report, now);
  let phase: PhaseProgress<'opening'> | undefined;
  let readBefore = 0;
  let totalBefore = 0;
  return (bytesRead, carBytes) => {
    if (!phase) {
      phase = new PhaseProgress('opening', 0, carBytes, told, now);
      totalBefore = carBytes;
    }
    phase.addToTotal(carBytes - totalBefore);
    totalBefore = carBytes;
    phase.addBytes(bytesRead - readBefore);
    readBefore = bytesRead;
    if (bytesRead === carBytes) phase.finish();
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

/**
 * Reports a listing of everything below a folder of a version (`canopy ls -R`) as its
 * 'listing' phase: given the entries it holds, takes how many were listed so far. Told from
 * SHOWN_AFTER_MS on: listing 300 000 files took 5 s, with nothing to show until the end, as
 * a listing is laid out in columns as wide as its widest entry.
 */
export function listingPhase(
  report: (progress: CountedProgress<'listing'>) => void,
  now: () => number,
): (listed: number, entries: number) => void {
  const told = toldOnceLong(report, now);
  let phase: PhaseProgress<'listing'> | undefined;
  let listedBefore = 0;
  return (listed, entries) => {
    phase ??= new PhaseProgress('listing', entries, 0, told, now);
    phase.addFiles(listed - listedBefore);
    listedBefore = listed;
    if (listed === entries) phase.finish();
  };
}
