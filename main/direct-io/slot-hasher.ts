import { Worker } from 'node:worker_threads';
import { ThreadFailure } from '../api/index.ts';

// SHA-256 of bytes in aligned slots (aligned-slots.ts), on a worker thread. A restore copies
// each large leaf into a slot to write it with O_DIRECT; hashing that copy here, while it is
// written, takes the leaf's check against its CID off the engine's thread, where it cost about
// a sixth of a restore's time (cold restores of the bench set: 4.7-5.0 s with no check of
// large leaves at all, against 5.7-6.2 s with it on the engine's thread). Checked here, they
// took 5.25 s on average against 5.52 s (seven alternating pairs): the copy into the slot, now
// the first to touch the leaf's bytes, pays the cache misses the hash used to, and a restore
// peaks 10-15 MB higher with the worker.

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const memory = new Uint8Array(workerData.memory);
parentPort.on('message', ({ id, offset, length }) => {
  const digest = createHash('sha256').update(memory.subarray(offset, offset + length)).digest();
  parentPort.postMessage({ id, digest });
});
`;

interface WorkerReply {
  readonly id: number;
  readonly digest: Uint8Array;
}

export class SlotHasher {
  private readonly worker: Worker;
  private readonly waiting = new Map<
    number,
    { resolve: (digest: Uint8Array) => void; reject: (error: Error) => void }
  >();
  private nextId = 0;
  /** Why the worker stopped, once it has: every digest asked for after that fails with it. */
  private stopped: Error | undefined;

  constructor(private readonly memory: SharedArrayBuffer) {
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { memory } });
    // Idle, it does not keep the process alive: a digest asked for keeps it busy meanwhile.
    this.worker.unref();
    this.worker.on('message', (reply: WorkerReply) => {
      const waiting = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      waiting?.resolve(reply.digest);
    });
    this.worker.on('error', (error) => this.stop(new ThreadFailure('hashing chunks', error)));
    this.worker.on('exit', (code) => this.stop(new Error(`the hashing worker exited (${code})`)));
  }

  /**
   * The SHA-256 of `view`, a view of this hasher's memory. Its bytes must not change until
   * this settles.
   */
  digestOf(view: Uint8Array): Promise<Uint8Array> {
    if (view.buffer !== this.memory) throw new Error('the bytes to hash are not in a slot');
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.nextId++;
    return new Promise<Uint8Array>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ id, offset: view.byteOffset, length: view.length });
    }).finally(() => {
      if (this.waiting.size === 0) this.worker.unref();
    });
  }

  private stop(error: Error): void {
    this.stopped ??= error;
    for (const waiting of this.waiting.values()) waiting.reject(this.stopped);
    this.waiting.clear();
  }

  /** Ends the worker; digests still waiting fail. */
  async close(): Promise<void> {
    this.stop(new Error('the hashing worker was closed'));
    await this.worker.terminate();
  }
}
