import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { CHUNK_BYTES } from './unixfs-settings.ts';
import { ThreadFailure } from '../api/index.ts';

// Reading and hashing a large file's chunks on a worker thread, so that the packer's own
// thread goes on with the small files meanwhile: on the two cores we measured, hashing 1 MiB
// chunks took as long as all the per-file work of the small files beside them, and the two
// ran one after the other. Where there are cores for it, chunks read at the same time (of
// several large files) go to several such threads.
//
// The chunks are read into slots of memory shared with the worker, and the packer hands these
// very bytes on once their hash is back: what is staged or uploaded is what was hashed.
//
// The memory is a WebAssembly memory for one reason: its start is page-aligned. Memory from
// malloc lies 16 bytes past a page boundary, and the kernel copied a page-cache page into
// such a buffer at a fifth of its speed on the machines we measured (read(2) of 1 GiB: about
// 500 ms against 100 ms).

/**
 * The worker: reads a chunk at a position into a slot, and hashes what it read. A whole chunk
 * of zeros (a disk image's or a preallocated file's empty space) is told by comparing, some
 * fifty times faster than hashing it: a 5 GiB disk image holding 2 MiB took 19.3 s to back up
 * and 13.5 s of it went to hashing zeros. A chunk with data stops the comparison at its first
 * byte that is not zero, mostly its first.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { readSync } = require('node:fs');
const { createHash } = require('node:crypto');
const memory = new Uint8Array(workerData.memory);
const zeros = Buffer.alloc(workerData.chunkBytes);
const zerosDigest = createHash('sha256').update(zeros).digest();
parentPort.on('message', ({ id, fd, position, length, offset }) => {
  try {
    let filled = 0;
    while (filled < length) {
      const count = readSync(fd, memory, offset + filled, length - filled, position + filled);
      if (count === 0) break;
      filled += count;
    }
    const bytes = memory.subarray(offset, offset + filled);
    const digest =
      filled === zeros.length && zeros.equals(bytes)
        ? zerosDigest
        : createHash('sha256').update(bytes).digest();
    parentPort.postMessage({ id, length: filled, digest });
  } catch (error) {
    parentPort.postMessage({ id, error: { message: String(error && error.message), code: error && error.code } });
  }
});
`;

const WASM_PAGE_BYTES = 64 * 1024;

/** A chunk read and hashed: a view of its slot, valid until the slot is given back. */
export interface HashedChunk {
  readonly bytes: Uint8Array;
  /** SHA-256 of `bytes`. */
  readonly digest: Uint8Array;
}

interface WorkerReply {
  readonly id: number;
  readonly length?: number;
  readonly digest?: Uint8Array;
  readonly error?: { readonly message: string; readonly code?: string };
}

/** WebAssembly's memory, as far as it is used here (Node's typings leave WebAssembly out). */
interface WasmMemoryConstructor {
  new (descriptor: { initial: number; maximum: number; shared: true }): {
    readonly buffer: SharedArrayBuffer;
  };
}

/** Shared memory for the slots: page-aligned where WebAssembly can give it. */
function sharedMemory(bytes: number): SharedArrayBuffer {
  const pages = Math.ceil(bytes / WASM_PAGE_BYTES);
  const wasm = (globalThis as { WebAssembly?: { Memory: WasmMemoryConstructor } }).WebAssembly;
  try {
    if (wasm) return new wasm.Memory({ initial: pages, maximum: pages, shared: true }).buffer;
    return new SharedArrayBuffer(bytes);
  } catch {
    // Where the address space is capped (a WebAssembly memory reserves gigabytes of it), plain
    // shared memory does the same job, only its reads may be slower.
    return new SharedArrayBuffer(bytes);
  }
}

/** A read that failed on the worker, with the file-system error's code. */
function readError(reply: NonNullable<WorkerReply['error']>): Error {
  const error: NodeJS.ErrnoException = new Error(reply.message);
  if (reply.code !== undefined) error.code = reply.code;
  return error;
}

/** One hashing thread and how many of its reads are still to come back. */
interface HashingWorker {
  readonly worker: Worker;
  pending: number;
}

/**
 * How many hashing threads a hasher starts at most: one per core, up to four. On the two
 * cores we measured, packing the bench's 1.2 GiB in a fresh process took 1.52-1.60 s with two
 * against 1.55-1.68 s with one (1.06-1.20 s against 1.24-1.30 s once warm), and no less with
 * three (1.65 and 2.26 s): the packer's own thread, busy with the small files, then waits.
 */
export function hashingThreadsHere(): number {
  return Math.max(1, Math.min(4, availableParallelism()));
}

export class ChunkHasher {
  private readonly workers: HashingWorker[] = [];
  private readonly memory: SharedArrayBuffer;
  private readonly free: number[] = [];
  private readonly waiting = new Map<
    number,
    {
      resolve: (chunk: HashedChunk) => void;
      reject: (error: Error) => void;
      offset: number;
      worker: HashingWorker;
    }
  >();
  private nextId = 0;
  /** Why the hasher stopped, once it has: every read after that fails with it. */
  private stopped: Error | undefined;

  /**
   * `slots` chunks can be held at once: two for each file read at the same time. Reads are
   * spread over up to `threads` worker threads, each started only when every one started
   * already has a read under way: a pack whose large files come one chunk at a time needs one.
   */
  constructor(
    slots: number,
    private readonly threads = hashingThreadsHere(),
  ) {
    this.memory = sharedMemory(slots * CHUNK_BYTES);
    for (let slot = slots - 1; slot >= 0; slot--) this.free.push(slot);
  }

  /** The thread to read with: an idle one, else a new one if allowed, else the least busy. */
  private workerForRead(): HashingWorker {
    let least: HashingWorker | undefined;
    for (const candidate of this.workers) {
      if (candidate.pending === 0) return candidate;
      if (!least || candidate.pending < least.pending) least = candidate;
    }
    if (least && this.workers.length >= this.threads) return least;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { memory: this.memory, chunkBytes: CHUNK_BYTES },
    });
    worker.on('message', (reply: WorkerReply) => this.settle(reply));
    worker.on('error', (error) =>
      this.stop(new ThreadFailure('reading and hashing chunks', error)),
    );
    worker.on('exit', (code) => this.stop(new Error(`the hashing worker exited (${code})`)));
    const started = { worker, pending: 0 };
    this.workers.push(started);
    return started;
  }

  /** A free slot; the caller must hold no more than it was built for. */
  takeSlot(): number {
    const slot = this.tryTakeSlot();
    if (slot === undefined) throw new Error('no chunk slot is free');
    return slot;
  }

  /** A free slot, or undefined when all are held. */
  tryTakeSlot(): number | undefined {
    return this.free.pop();
  }

  giveSlot(slot: number): void {
    this.free.push(slot);
  }

  /**
   * Reads up to `length` bytes of `fd` from `position` into `slot`, fewer at the file's end,
   * and hashes them. The slot must not be read into again until this settles.
   */
  read(fd: number, position: number, length: number, slot: number): Promise<HashedChunk> {
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.nextId++;
    const offset = slot * CHUNK_BYTES;
    const worker = this.workerForRead();
    worker.pending += 1;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, offset, worker });
      worker.worker.postMessage({
        id,
        fd,
        position,
        length: Math.min(length, CHUNK_BYTES),
        offset,
      });
    });
  }

  private settle(reply: WorkerReply): void {
    const waiting = this.waiting.get(reply.id);
    if (!waiting) return;
    this.waiting.delete(reply.id);
    waiting.worker.pending -= 1;
    if (reply.error) {
      waiting.reject(readError(reply.error));
      return;
    }
    const length = reply.length ?? 0;
    waiting.resolve({
      bytes: new Uint8Array(this.memory, waiting.offset, length),
      digest: reply.digest ?? new Uint8Array(0),
    });
  }

  private stop(error: Error): void {
    this.stopped ??= error;
    for (const waiting of this.waiting.values()) waiting.reject(this.stopped);
    this.waiting.clear();
  }

  /** Ends the workers; reads still waiting fail. */
  async close(): Promise<void> {
    this.stop(new Error('the hashing worker was closed'));
    await Promise.all(this.workers.map(({ worker }) => worker.terminate()));
  }
}
