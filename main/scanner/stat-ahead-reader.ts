import { constants } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { compareUtf8 } from '../protocol/index.ts';
import {
  entryStatsOf,
  readFoldersHere,
  type FolderReader,
  type ListedFolder,
} from './folder-reader.ts';
import { ThreadFailure } from '../api/index.ts';

// A rescan of an unchanged source is a walk: list each folder, lstat each entry, and compare
// what it finds with the file index. On the walk's own thread those calls took about half of a
// rescan of 100 000 files (1.0-1.2 s of 2.0 s on the machine we measured), the index's lookups
// most of the rest, one after the other on a machine with two cores.
//
// So for such a walk a worker thread lists the folders and looks at their entries ahead of it:
// each folder the walk lists, the worker has listed already (or is listing), and with it come
// the folders inside it, sent to the worker in the order the walk will reach them. The worker
// answers a folder in one message: its names, and each entry's lstat packed into one array.
// At most AHEAD_FOLDERS folders are asked for ahead of the walk, so what waits for it stays
// small, and a folder asked for late (a deep tree) is not long behind others. That rescan then
// took 2.1-2.6 s (npm run bench -- backup), against 2.2-4.2 s without, the machine as busy.
//
// What the walk sees is the same as from its own calls: the names, the lstat fields it reads,
// and each failure with its code and message. Should the worker stop, or fail to start, the
// walk lists the folders left on its own thread: slower, finding the same.

/** Folders asked of the worker that the walk has not listed yet, at most. */
const AHEAD_FOLDERS = 64;

/** A failed call's fields, as the worker sends them. */
interface Failure {
  readonly code?: string;
  readonly message: string;
  readonly errno?: number;
  readonly syscall?: string;
  readonly path?: string;
}

/** The lstat fields of a folder's entries, the nth entry's at n in each array. */
interface FolderStats {
  readonly modes: Float64Array;
  readonly sizes: Float64Array;
  readonly mtimesNs: BigInt64Array;
  readonly ctimesNs: BigInt64Array;
  readonly inos: BigUint64Array;
  readonly devs: BigUint64Array;
}

/** The worker's answer for a folder. */
type Answer =
  | { readonly absolute: string; readonly failure: Failure }
  | {
      readonly absolute: string;
      /** The device the folder itself lies on. */
      readonly dev: bigint;
      readonly names: string[];
      readonly stats: FolderStats;
      readonly failures: ReadonlyArray<Failure & { readonly index: number }>;
    };

/** Lists each folder it is sent, and lstats its entries, answering one message per folder. */
export const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { lstatSync, readdirSync, statSync } = require('node:fs');
const path = require('node:path');
const failure = (error) => ({
  code: error.code,
  message: error.message,
  errno: error.errno,
  syscall: error.syscall,
  path: error.path,
});
parentPort.on('message', (absolute) => {
  let names;
  let dev;
  try {
    // stat, not lstat: the source itself may be given as a link to its folder.
    dev = statSync(absolute, { bigint: true }).dev;
    names = readdirSync(absolute);
  } catch (error) {
    parentPort.postMessage({ absolute, failure: failure(error) });
    return;
  }
  const count = names.length;
  const stats = {
    modes: new Float64Array(count),
    sizes: new Float64Array(count),
    mtimesNs: new BigInt64Array(count),
    ctimesNs: new BigInt64Array(count),
    inos: new BigUint64Array(count),
    devs: new BigUint64Array(count),
  };
  const failures = [];
  for (let index = 0; index < count; index += 1) {
    try {
      const found = lstatSync(path.join(absolute, names[index]), { bigint: true });
      stats.modes[index] = Number(found.mode);
      stats.sizes[index] = Number(found.size);
      stats.mtimesNs[index] = found.mtimeNs;
      stats.ctimesNs[index] = found.ctimeNs;
      stats.inos[index] = found.ino;
      stats.devs[index] = found.dev;
    } catch (error) {
      failures.push({ index, ...failure(error) });
    }
  }
  const buffers = Object.values(stats).map((array) => array.buffer);
  parentPort.postMessage({ absolute, dev, names, stats, failures }, buffers);
});
`;

/** The error a failed call threw in the worker, as the walk would have met it. */
function errorOf(failure: Failure): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(failure.message);
  if (failure.code !== undefined) error.code = failure.code;
  if (failure.errno !== undefined) error.errno = failure.errno;
  if (failure.syscall !== undefined) error.syscall = failure.syscall;
  if (failure.path !== undefined) error.path = failure.path;
  return error;
}

export class StatAheadReader implements FolderReader {
  private worker: Worker | undefined;
  /** Folders asked of the worker and not yet listed by the walk, by absolute path. */
  private readonly asked = new Map<string, Promise<Answer>>();
  /** Answers come in the order the folders were asked for; each settles its folder's promise. */
  private readonly waiting = new Map<
    string,
    { resolve: (answer: Answer) => void; reject: (error: Error) => void }
  >();
  /**
   * Folders found inside listed ones and not asked for yet, as a stack: the next the walk
   * reaches last (the first folder inside the folder listed last).
   */
  private readonly toAsk: string[] = [];
  private failed: Error | undefined;

  /** `workerSource` is the worker's code: a test gives one that stops, as a crash would. */
  constructor(
    private readonly root: string,
    private readonly workerSource = WORKER_SOURCE,
  ) {}

  async list(absolute: string): Promise<ListedFolder> {
    let answer: Answer;
    try {
      answer = await (this.asked.get(absolute) ?? this.ask(absolute));
    } catch {
      // Rejected only when the worker stopped or could not start (this.failed says how): it
      // cost the walk its head start, not a folder.
      this.asked.delete(absolute);
      return readFoldersHere.list(absolute);
    }
    this.asked.delete(absolute);
    if ('failure' in answer) {
      this.askMore();
      throw errorOf(answer.failure);
    }
    const order = answer.names.map((_name, index) => index);
    order.sort((a, b) => compareUtf8(answer.names[a] ?? '', answer.names[b] ?? ''));
    const names = order.map((index) => answer.names[index] ?? '');
    const failures = new Map(answer.failures.map((failure) => [failure.index, failure]));
    // The folders inside, which the walk reaches before those found earlier: onto the stack,
    // the first of them last. Not where another file system is mounted: the walk decides on
    // those (a network share's automount point mounts it when listed; walk-source.ts).
    const inside: string[] = [];
    for (const index of order) {
      const name = answer.names[index] ?? '';
      const mode = answer.stats.modes[index] ?? 0;
      if (failures.has(index) || (mode & constants.S_IFMT) !== constants.S_IFDIR) continue;
      if (answer.stats.devs[index] !== answer.dev) continue;
      inside.push(path.join(absolute, name));
    }
    for (let at = inside.length - 1; at >= 0; at -= 1) this.toAsk.push(inside[at] ?? '');
    this.askMore();
    return {
      names,
      stats: (sorted) => {
        const index = order[sorted] ?? -1;
        const failure = failures.get(index);
        if (failure) throw errorOf(failure);
        const { modes, sizes, mtimesNs, ctimesNs, inos, devs } = answer.stats;
        return entryStatsOf(
          modes[index] ?? 0,
          sizes[index] ?? 0,
          mtimesNs[index] ?? 0n,
          ctimesNs[index] ?? 0n,
          inos[index] ?? 0n,
          devs[index] ?? 0n,
        );
      },
    };
  }

  /** The walk will not list `absolute`: what was asked of it no longer holds the walk back. */
  passOver(absolute: string): void {
    if (this.asked.delete(absolute)) this.askMore();
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.terminate();
  }

  /** Asks for the folders next in the walk's order, up to AHEAD_FOLDERS ahead of it. */
  private askMore(): void {
    while (!this.failed && this.asked.size < AHEAD_FOLDERS && this.toAsk.length > 0) {
      const next = this.toAsk.pop();
      // Its failure is the walk's to meet, when it lists the folder (list awaits the same
      // promise); the handler here only keeps it from counting as unhandled meanwhile.
      if (next !== undefined && !this.asked.has(next)) this.ask(next).catch(() => undefined);
    }
  }

  private ask(absolute: string): Promise<Answer> {
    const answer = new Promise<Answer>((resolve, reject) => {
      if (this.failed) {
        reject(this.failed);
        return;
      }
      this.waiting.set(absolute, { resolve, reject });
      let worker: Worker;
      try {
        worker = this.started();
      } catch (error) {
        // Not started (no thread to be had): the walk lists on its own thread instead.
        this.failed = error instanceof Error ? error : new Error(String(error));
        this.waiting.delete(absolute);
        reject(this.failed);
        return;
      }
      // Kept running while it owes an answer: nothing else may be keeping the process alive.
      worker.ref();
      worker.postMessage(absolute);
    });
    this.asked.set(absolute, answer);
    return answer;
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.workerSource, { eval: true });
    worker.on('message', (answer: Answer) => {
      const waiting = this.waiting.get(answer.absolute);
      this.waiting.delete(answer.absolute);
      // Owing nothing, it never keeps the process running: a walk left unfinished and never
      // closed holds no process open.
      if (this.waiting.size === 0) worker.unref();
      waiting?.resolve(answer);
    });
    const fail = (error: Error): void => {
      this.failed = error;
      for (const waiting of this.waiting.values()) waiting.reject(error);
      this.waiting.clear();
    };
    worker.on('error', (error) => fail(new ThreadFailure(`listing ${this.root}`, error)));
    worker.on('exit', (code) => {
      if (this.worker === worker)
        fail(new Error(`the worker listing ${this.root} stopped (exit ${code})`));
    });
    this.worker = worker;
    return worker;
  }
}
