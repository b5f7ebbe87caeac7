// The time a phase has left, learned from what its files and its bytes each cost.
//
// A phase's time goes both on its bytes and on each of its files: reading, sending or writing
// a byte, and opening, creating, renaming and dating a file. Measured in bytes alone, a restore
// of five files of 100 MB and then 50 000 files of 1 KiB said "almost done" for the 7.5 s its
// small files took, as 99 % of its bytes were written; the other way round, a rate taken on
// small files says hours for the large ones that follow.
//
// So each stretch between two samples is a row of a least-squares fit of its duration to the
// share of the phase's files and of its bytes done in it: `fileCost`, `byteCost`, the seconds
// all of the phase's files and all of its bytes would take on their own. Older stretches count
// less, halving every `halfLifeMs`, so the fit follows a link or a disk that becomes faster or
// slower, as the single rate it replaces did.
//
// Where the stretches cannot tell the two costs apart (files of much the same size all along),
// a light ridge term pulls the two costs together: the time left is then in proportion to the
// share of the phase left, as a single rate would say. It weighs little against stretches that
// do tell them apart. Until a file has ended, nothing is known of what one costs, and the
// bytes alone are gone by (an upload of shards, whose files were all done before, or a file of
// 4 GiB, which ends with its last byte); until a byte has moved, there is no time left to say
// while bytes are left.
//
// A wait with nothing moving is counted in the stretch that ends when something moves again,
// so that a slow host or a retry's backoff counts as slowness. A count that goes back (bytes
// of a failed attempt taken back) starts the next stretch from the lower count at the same
// time: the attempt's time goes on what is then done again. Until the first sample that moves,
// nothing is measured: the wait before a phase's first byte is no measure of its speed (a
// backup of 750 000 small files waited half a second for its first shard's first 59 bytes, and
// a rate taken over that wait said "about 96 h 41 min left" for a phase that took 50 s).

/** Samples closer than this to the last are merged into the next. */
const SAMPLE_MS = 250;
/** The ridge term's weight, as a share of the fit's own weight on the two shares. */
const RIDGE = 0.05;

/** Sums of the fit, each row weighted by its age and by its time over its work (addStretch). */
interface FitSums {
  /** Files share squared, files share × bytes share, bytes share squared. */
  ff: number;
  fb: number;
  bb: number;
  /** Each share × the stretch's seconds. */
  ft: number;
  bt: number;
}

export class WorkMeter {
  private readonly filesScale: number;
  private readonly bytesScale: number;
  private last: { at: number; files: number; bytes: number } | undefined;
  /** Whether a sample has moved from the first: stretches are measured from the one that did. */
  private moving = false;
  private readonly sums: FitSums = { ff: 0, fb: 0, bb: 0, ft: 0, bt: 0 };

  /**
   * `filesTotal` and `bytesTotal` are the phase's size when it starts (a total of 0, as a pull
   * of unknown size has, counts each unit whole).
   */
  constructor(
    private readonly now: () => number,
    filesTotal: number,
    bytesTotal: number,
    private readonly halfLifeMs = 5000,
  ) {
    this.filesScale = Math.max(filesTotal, 1);
    this.bytesScale = Math.max(bytesTotal, 1);
  }

  /** Records that `files` files and `bytes` bytes are done by now. */
  sample(files: number, bytes: number): void {
    const at = this.now();
    const last = this.last;
    if (!last || files < last.files || bytes < last.bytes) {
      // The first sample; or a count went back: what was done again starts from here, and
      // the time since the last stretch goes on it.
      this.last = { at: last?.at ?? at, files, bytes };
      return;
    }
    const moved = files !== last.files || bytes !== last.bytes;
    if (!this.moving) {
      // Still waiting for the first unit, or the first to move: it starts the measure.
      this.moving = moved;
      this.last = { at, files, bytes };
      return;
    }
    const elapsed = at - last.at;
    if (!moved || elapsed < SAMPLE_MS) return;
    this.addStretch(
      elapsed,
      (files - last.files) / this.filesScale,
      (bytes - last.bytes) / this.bytesScale,
    );
    this.last = { at, files, bytes };
  }

  /**
   * Seconds to do `filesLeft` more files and `bytesLeft` more bytes at the costs learned; 0 when
   * nothing is left, and null until what is left can be costed: before any stretch, and while
   * bytes are left of which none has moved yet.
   */
  etaSeconds(filesLeft: number, bytesLeft: number): number | null {
    if (filesLeft <= 0 && bytesLeft <= 0) return 0;
    const filesShare = Math.max(filesLeft, 0) / this.filesScale;
    const bytesShare = Math.max(bytesLeft, 0) / this.bytesScale;
    const { ff, bb, ft, bt } = this.sums;
    if (bb <= 0) {
      // No byte has moved: what the bytes left cost is not known yet.
      if (bytesShare > 0 || ff <= 0) return null;
      return (ft / ff) * filesShare;
    }
    // No file has ended: a file's cost is not known, and its bytes are all there is to go by.
    // A file of 4 GiB ends only with its last byte; a cost of files made up meanwhile (the
    // ridge's, as much as bytes) added as much again to its time left.
    if (ff <= 0) return (bt / bb) * bytesShare;
    const { fileCost, byteCost } = this.costs();
    return fileCost * filesShare + byteCost * bytesShare;
  }

  private addStretch(elapsedMs: number, filesShare: number, bytesShare: number): void {
    const keep = Math.pow(0.5, elapsedMs / this.halfLifeMs);
    // Each row weighs in proportion to its time over its work, so that a stretch that did a
    // lot does not outweigh the others by its square: with one kind of work, the fit is then
    // the time over the work done, the average rate.
    const weight = 1 / (filesShare + bytesShare);
    const seconds = elapsedMs / 1000;
    const { sums } = this;
    sums.ff = sums.ff * keep + weight * filesShare * filesShare;
    sums.fb = sums.fb * keep + weight * filesShare * bytesShare;
    sums.bb = sums.bb * keep + weight * bytesShare * bytesShare;
    sums.ft = sums.ft * keep + weight * filesShare * seconds;
    sums.bt = sums.bt * keep + weight * bytesShare * seconds;
  }

  /**
   * The seconds all the phase's files, and all its bytes, take: the fit's solution, once some
   * of both have moved.
   */
  private costs(): { fileCost: number; byteCost: number } {
    const { ff, fb, bb, ft, bt } = this.sums;
    // Minimises Σ w (t − fileCost·f − byteCost·b)² + ridge·(fileCost − byteCost)².
    const ridge = RIDGE * (ff + bb);
    const a = ff + ridge;
    const cross = fb - ridge;
    const d = bb + ridge;
    const det = a * d - cross * cross;
    let fileCost = (d * ft - cross * bt) / det;
    let byteCost = (a * bt - cross * ft) / det;
    // A negative cost is a fit to noise: the other share then explains the time alone.
    if (fileCost < 0) {
      fileCost = 0;
      byteCost = bt / bb;
    } else if (byteCost < 0) {
      byteCost = 0;
      fileCost = ft / ff;
    }
    return { fileCost, byteCost };
  }
}
