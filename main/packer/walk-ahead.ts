import { setImmediate } from 'node:timers/promises';
import type { SourceEntry } from '../scanner/index.ts';

// The walk, run ahead of the packing by a bounded number of entries, so that some files can
// be started before their turn: the packer starts large files early, to be read and hashed on
// another thread while its own packs the small files walked before them. A tree walked folder
// by folder otherwise keeps the two apart: all of one folder's documents, then all of the next
// one's photos, and one thread idle through each.
//
// Entries still come out in walk order, which is what the folders are built in; a file started
// early comes out with its packing under way.

/**
 * The longest the caller runs between two turns of the event loop. Packing small files is all
 * promptly settled promises, which never give the event loop a turn: without one, the
 * hasher's replies wait, and it sits idle however far ahead the walk is.
 */
const TURN_EVERY_MS = 2;

/** An entry of the walk; for a file started early, its packing (null when it was skipped). */
export interface AheadEntry<T> {
  readonly entry: SourceEntry;
  readonly early: boolean;
  made?: Promise<T> | null;
}

export interface WalkAheadOptions<T> {
  /** Whether an entry is started early, as soon as it is walked and there is room. */
  readonly isEarly: (entry: SourceEntry) => boolean;
  /** Starts an early entry's packing; undefined when it is skipped. */
  readonly start: (entry: SourceEntry) => Promise<T> | undefined;
  /** Entries walked but not yet taken, at most. */
  readonly aheadEntries: number;
  /** Early entries being packed at once, at most. */
  readonly atOnce: number;
  /** Hears of each entry as it is walked, in walk order, before it is taken. */
  readonly onWalked?: (entry: SourceEntry) => void;
}

/** A first-in, first-out queue whose taking does not move the rest. */
class Queue<T> {
  private items: T[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T | undefined {
    if (this.head === this.items.length) return undefined;
    const item = this.items[this.head];
    this.head += 1;
    // Taken items are dropped once they are half the array, so it does not grow forever.
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

export class WalkAhead<T> {
  private readonly walk: AsyncIterator<SourceEntry>;
  private readonly options: WalkAheadOptions<T>;
  private readonly walked = new Queue<AheadEntry<T>>();
  /** Early entries walked and not yet started, in walk order. */
  private readonly waiting = new Queue<AheadEntry<T>>();
  private readonly running = new Set<Promise<T>>();
  private walkEnded = false;
  private closed = false;
  private lastTurn = performance.now();

  constructor(walk: AsyncIterable<SourceEntry>, options: WalkAheadOptions<T>) {
    this.walk = walk[Symbol.asyncIterator]();
    this.options = options;
  }

  /** Every early packing still running, for the caller to wait on when it stops. */
  get inFlight(): ReadonlySet<Promise<T>> {
    return this.running;
  }

  /** The next entry in walk order, once the walk has run ahead as far as allowed. */
  async next(): Promise<AheadEntry<T> | undefined> {
    if (performance.now() - this.lastTurn >= TURN_EVERY_MS) {
      await setImmediate();
      this.lastTurn = performance.now();
    }
    while (!this.walkEnded && this.walked.length < this.options.aheadEntries) {
      const step = await this.walk.next();
      if (step.done === true) {
        this.walkEnded = true;
        break;
      }
      this.options.onWalked?.(step.value);
      const item: AheadEntry<T> = { entry: step.value, early: this.options.isEarly(step.value) };
      this.walked.push(item);
      if (item.early) this.waiting.push(item);
    }
    this.startWaiting();
    return this.walked.shift();
  }

  /**
   * An early entry's packing once it is started (wrapped, so that waiting for the start does
   * not wait for the packing), or null when it was skipped; those walked before it start
   * first. Throws the failure of an early packing that fails meanwhile.
   */
  async started(item: AheadEntry<T>): Promise<{ readonly made: Promise<T> } | null> {
    for (;;) {
      this.startWaiting();
      if (item.made !== undefined) return item.made && { made: item.made };
      if (this.running.size === 0)
        throw new Error(
          this.closed ? 'the walk ahead was closed' : 'an early entry was not walked',
        );
      // Full: each packing that ends starts the next before this race sees it end.
      await Promise.race(this.running);
    }
  }

  /**
   * Ends the walk, should the caller stop before it ran out, and starts nothing more: what is
   * running is `inFlight`, for the caller to wait on.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.walkEnded) return;
    this.walkEnded = true;
    await this.walk.return?.();
  }

  /**
   * Starts `entry`'s packing. A start that throws (its file's disk gone as it was opened) fails
   * that packing, as one that fails later does: thrown here, it would escape from whichever
   * packing's end started this one, as a rejection nothing handles, which ends the process.
   */
  private startOf(entry: SourceEntry): Promise<T> | undefined {
    try {
      return this.options.start(entry);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private startWaiting(): void {
    while (!this.closed && this.running.size < this.options.atOnce) {
      const item = this.waiting.shift();
      if (!item) return;
      const made = this.startOf(item.entry);
      item.made = made ?? null;
      if (!made) continue;
      this.running.add(made);
      const ended = (): void => {
        this.running.delete(made);
        this.startWaiting();
      };
      void made.then(ended, ended);
    }
  }
}
