import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { O_NOATIME_IF_ANY } from '../scanner/index.ts';
import type { ScannedFile } from './pack-source.ts';

// Small files are read on the packer's thread in synchronous calls (small-file.ts): a few
// microseconds each from the page cache. Not in the cache, as in a first backup of files not
// opened for a while, each read waits on the disk, one at a time, and the whole backup with it:
// on the machine we measured, a first backup of 100 000 small files took 24-26 s from a cold
// cache against 12-14 s from a warm one, and reading the files one at a time took 9 s against
// 3 s eight at a time.
//
// So once the packer's reads are seen waiting on the disk (SlowReads), the files walked but not
// yet taken are read ahead on a worker thread, several at a time, and their bytes thrown away:
// the page cache keeps them for the packer's own read, which alone is trusted. A file that
// cannot be opened or read is simply not read ahead. That backup then took 18-19 s.
// - Not through the thread pool from the packer's thread: while that thread sits in its own
//   synchronous reads, a read ahead that ends cannot start the next, and the backup took 27 s.
// - Not from the start: from the cache, reading ahead only costs (with it always on, the warm
//   backup was 5-7 % slower, and the worker's heap added 30 MB to its peak).
//
// It runs at most READ_AHEAD_FILES files and READ_AHEAD_BYTES ahead of what the packer has
// taken, so that what it read is still in the cache when its turn comes.

/** Reads in flight at once: enough to keep a disk's queue busy, and some of the pool free. */
const READS_AT_ONCE = 6;
/** Files read ahead of the packer, at most. */
export const READ_AHEAD_FILES = 1024;
/** Bytes read ahead of the packer, at most. */
export const READ_AHEAD_BYTES = 32 * 1024 * 1024;

/** Files handed to the worker in one message, at most. */
const BATCH_FILES = 64;

/** Reads the files it is sent, READS_AT_ONCE at a time, into a buffer nothing looks at. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { open, read, close, constants } = require('node:fs');
const scratch = Buffer.allocUnsafe(workerData.largestFile);
// Never follows a symbolic link, and a named pipe opens without waiting for a writer. Leaves
// the access time as it was where it may (see main/scanner/source-file.ts).
const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const noAtime = flags | workerData.noAtime;
let queue = [];
let head = 0;
let running = 0;
let ended = 0;
function done() {
  running -= 1;
  ended += 1;
  pump();
  // Caught up: how many reads have ended so far (SmallFileReadAhead.readsEnded).
  if (running === 0) parentPort.postMessage(ended);
}
function pump() {
  while (running < workerData.atOnce && head < queue.length) {
    const file = queue[head];
    head += 1;
    running += 1;
    const opened = (openError, fd) => {
      if (openError) return done();
      read(fd, scratch, 0, scratch.length, 0, () => close(fd, done));
    };
    open(file, noAtime, (openError, fd) => {
      if (openError && openError.code === 'EPERM' && noAtime !== flags) open(file, flags, opened);
      else opened(openError, fd);
    });
  }
  if (head === queue.length) {
    queue = [];
    head = 0;
  }
}
parentPort.on('message', (files) => {
  for (const file of files) queue.push(file);
  pump();
});
`;

/**
 * Whether the packer's own reads wait on the disk: nearly all of the last READ_WINDOW took
 * longer than a read from the page cache does. From the cache, 96 % of them took under 10 us
 * in a backup of 100 000 small files, but about 1 % took over 50 us, in bursts; from the disk,
 * nearly all took 50-500 us.
 */
export class SlowReads {
  static readonly READ_WINDOW = 256;
  static readonly SLOW_IN_WINDOW = 224;
  static readonly SLOW_MS = 0.04;
  /** Whether each of the last READ_WINDOW reads was slow (1), as a ring. */
  private readonly window = new Uint8Array(SlowReads.READ_WINDOW);
  private at = 0;
  private slowInWindow = 0;

  /** Notes a read that took `ms`; true once nearly all recent reads were slow. */
  note(ms: number): boolean {
    const slow = ms >= SlowReads.SLOW_MS ? 1 : 0;
    this.slowInWindow += slow - (this.window[this.at] ?? 0);
    this.window[this.at] = slow;
    this.at = (this.at + 1) % SlowReads.READ_WINDOW;
    return this.slowInWindow >= SlowReads.SLOW_IN_WINDOW;
  }
}

/** A small file walked and not yet taken. */
interface WalkedFile {
  readonly file: ScannedFile;
  /** Whether it went to the worker. */
  handed: boolean;
}

/**
 * The small files the packer will take, in the order it takes them; read ahead once started.
 * Every file `walked` must be `taken` once, in the same order.
 */
export class SmallFileReadAhead {
  /** Files walked and not yet taken, from `head`; those before `next` were looked at. */
  private files: WalkedFile[] = [];
  private head = 0;
  private next = 0;
  /** Files and bytes that went to the worker and are not yet taken. */
  private aheadFiles = 0;
  private aheadBytes = 0;
  /** Files waiting to go to the worker in one message. */
  private batch: string[] = [];
  /** Started by `start`. */
  private worker: Worker | undefined;
  private closed = false;
  private ended = 0;

  /**
   * Files are read from `sourceDir`, those that are `toBeRead` (not known unchanged), of at most
   * `largestFile` bytes.
   */
  constructor(
    private readonly sourceDir: string,
    private readonly largestFile: number,
    private readonly toBeRead: (file: ScannedFile) => boolean,
  ) {}

  /** `file` is walked: the packer will take it in its turn. */
  walked(file: ScannedFile): void {
    this.files.push({ file, handed: false });
    if (this.worker) this.handOn();
  }

  /** The packer takes `file`, the first walked and not yet taken. */
  taken(file: ScannedFile): void {
    const walked = this.files[this.head];
    if (walked?.file !== file) throw new Error(`${file.path} was taken out of its walk order`);
    this.head += 1;
    if (walked.handed) {
      this.aheadFiles -= 1;
      this.aheadBytes -= file.size;
    }
    // The packer got there first: the read ahead goes on from the file after it.
    if (this.next < this.head) this.next = this.head;
    // Taken ones are dropped once they are half the array, so it does not grow forever.
    if (this.head >= 1024 && this.head * 2 >= this.files.length) {
      this.files = this.files.slice(this.head);
      this.next -= this.head;
      this.head = 0;
    }
    if (this.worker) this.handOn();
  }

  /** Reads ahead from now on, starting with the files walked and not yet taken. */
  start(): void {
    if (this.worker || this.closed) return;
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        largestFile: this.largestFile,
        atOnce: READS_AT_ONCE,
        noAtime: O_NOATIME_IF_ANY,
      },
    });
    // It only warms the cache: stopped, the packer reads as it would without it.
    this.worker.on('error', () => undefined);
    this.worker.on('message', (ended: number) => {
      this.ended = ended;
    });
    this.worker.unref();
    this.handOn();
  }

  /** Whether it reads ahead. */
  get started(): boolean {
    return this.worker !== undefined;
  }

  /** Files that went to the worker and are not yet taken. */
  get filesAhead(): number {
    return this.aheadFiles;
  }

  /**
   * Reads ahead that have ended (the file read, or not found), as of the last time the worker
   * had none left under way.
   */
  get readsEnded(): number {
    return this.ended;
  }

  /** Stops the worker; reads in flight are abandoned. */
  async close(): Promise<void> {
    this.closed = true;
    await this.worker?.terminate();
  }

  /** Hands the worker the next files to be read while it is not too far ahead. */
  private handOn(): void {
    const worker = this.worker;
    if (!worker || this.closed) return;
    while (
      this.next < this.files.length &&
      this.aheadFiles < READ_AHEAD_FILES &&
      this.aheadBytes < READ_AHEAD_BYTES
    ) {
      const walked = this.files[this.next] as WalkedFile;
      this.next += 1;
      if (walked.file.size === 0 || !this.toBeRead(walked.file)) continue;
      walked.handed = true;
      this.aheadFiles += 1;
      this.aheadBytes += walked.file.size;
      this.batch.push(path.join(this.sourceDir, walked.file.path));
    }
    // In batches, but never held back while the worker may be running out of files.
    const queued = this.aheadFiles - this.batch.length;
    if (this.batch.length >= BATCH_FILES || (this.batch.length > 0 && queued < BATCH_FILES)) {
      worker.postMessage(this.batch);
      this.batch = [];
    }
  }
}
