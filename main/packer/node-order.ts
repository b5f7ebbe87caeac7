import { CID } from 'multiformats/cid';
import type { NodeSink } from './pack-source.ts';

// The order a tree's nodes reach its metadata CAR: each file's nodes at the file's place in
// the walk, each folder's right after everything under it (post-order), whatever order they
// are made in. The packer makes several files at once, and large files ahead of their turn,
// so the order they are made in differs from one backup to the next.
//
// Our service keeps metadata CARs in content-defined chunks, stored once however many versions
// share them (server/store/metadata-chunks.ts). A later version copies the nodes of the folders
// it did not walk from the version before, in this same order (copy-nodes.ts); so the CAR of a
// version that changed one file has the bytes of the one before, but for the nodes of that file
// and of the folders above it, and the service stores little more than those.
//
// A slot holds one entry's nodes. Slots are placed in the tree's order; the first one still
// open writes straight to the sink, and those after it hold their nodes until it closes. While
// a large file is read, the packer goes on with the small files after it, whose nodes are held
// meanwhile: a 100 GB disk image first, a million small files after it, and they would be
// hundreds of megabytes. Past a bound, a slot's put waits until the nodes held are written
// (or the slot is first in line): the small files wait for the large one, as they did before
// the packer ran ahead.

/** Nodes held beyond this many bytes make the puts of slots behind the first one wait. */
export const MAX_HELD_NODE_BYTES = 8 * 1024 * 1024;
/**
 * What holding a node costs beyond its bytes: the view of its copy. A node is held as one copy
 * of its CID's length, its CID and its bytes, not as the CID object and the bytes given, which
 * cost about a kilobyte more once a node waits long enough to outlive young-generation
 * collection.
 */
const HELD_NODE_OVERHEAD_BYTES = 128;

/** A held node's copy: [CID length][CID][node]. */
function heldCopy(cid: CID, bytes: Uint8Array): Buffer {
  const cidBytes = cid.bytes;
  if (cidBytes.length > 0xff) throw new Error(`a node's CID of ${cidBytes.length} bytes`);
  const copy = Buffer.allocUnsafe(1 + cidBytes.length + bytes.length);
  copy[0] = cidBytes.length;
  copy.set(cidBytes, 1);
  copy.set(bytes, 1 + cidBytes.length);
  return copy;
}

export class NodeSlot implements NodeSink {
  /** Nodes put before this slot was the first open one; null once it was. */
  held: Buffer[] | null = [];
  closed = false;
  placed = false;

  constructor(private readonly order: NodeOrder) {}

  /**
   * Writes the node when this slot is first in line, else holds it until it is; then, when
   * too many nodes are held, resolves once there is room again.
   */
  put(cid: CID, bytes: Uint8Array): void | Promise<void> {
    if (this.closed) throw new Error('a node was put in a closed slot');
    if (this.held === null) return this.order.write(cid, bytes);
    const copy = heldCopy(cid, bytes);
    this.held.push(copy);
    return this.order.hold(this, copy.length);
  }

  /** No more nodes come: the slots after it may write theirs. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.order.closed(this);
  }
}

export class NodeOrder {
  /** Placed slots not yet closed and written, the first one writing through. */
  private readonly line: NodeSlot[] = [];
  private lineHead = 0;
  /** Writes of held nodes, whose failures come out of `finish`. */
  private writes: Promise<void> = Promise.resolve();
  private failure: unknown;
  private failed = false;
  /** The pack ended: puts no longer wait (release). */
  private released = false;
  /** Bytes of the nodes held, with their overhead. */
  private heldBytes = 0;
  /** Puts waiting for room, each with its slot. */
  private waiting: Array<{ readonly slot: NodeSlot; readonly resume: () => void }> = [];

  constructor(
    private readonly sink: NodeSink,
    private readonly maxHeldBytes = MAX_HELD_NODE_BYTES,
  ) {}

  /** A slot not yet in line: it holds its nodes until `place` puts it there. */
  detached(): NodeSlot {
    return new NodeSlot(this);
  }

  /** Puts `slot` last in line. */
  place(slot: NodeSlot): void {
    if (slot.placed) throw new Error('a slot was placed twice');
    slot.placed = true;
    this.line.push(slot);
    this.advance();
  }

  /** A new slot, last in line. */
  next(): NodeSlot {
    const slot = this.detached();
    this.place(slot);
    return slot;
  }

  /** Resolves once every held node is written; rejects with the first write that failed. */
  async finish(): Promise<void> {
    await this.writes;
    if (this.lineHead < this.line.length) throw new Error('a slot of the tree was left open');
    if (this.failed) throw this.failure;
  }

  /** @internal A node of the first slot in line. */
  write(cid: CID, bytes: Uint8Array): void | Promise<void> {
    return this.sink.put(cid, bytes);
  }

  /** @internal */
  closed(slot: NodeSlot): void {
    if (slot.placed) this.advance();
  }

  /**
   * Lets every put waiting for room go on, and no later one wait: the pack ended, and the slots
   * ahead of them may never be placed or closed. Files still being packed (started ahead of
   * their turn) must not wait for ever on a line that no longer moves.
   */
  release(): void {
    this.released = true;
    for (const waiter of this.waiting) waiter.resume();
    this.waiting = [];
  }

  /** @internal Counts a node `slot` held; a promise to wait on while there is no room. */
  hold(slot: NodeSlot, bytes: number): Promise<void> | undefined {
    this.heldBytes += bytes + HELD_NODE_OVERHEAD_BYTES;
    if (this.released || this.heldBytes <= this.maxHeldBytes) return undefined;
    return new Promise((resume) => this.waiting.push({ slot, resume }));
  }

  /** Lets go the puts that have room now, or whose slot is first in line. */
  private wake(): void {
    if (this.waiting.length === 0) return;
    const room = this.heldBytes <= this.maxHeldBytes;
    const still: typeof this.waiting = [];
    for (const waiter of this.waiting) {
      if (room || waiter.slot.held === null) waiter.resume();
      else still.push(waiter);
    }
    this.waiting = still;
  }

  /** Writes what the slots at the head of the line held, up to the first one still open. */
  private advance(): void {
    for (;;) {
      const head = this.line[this.lineHead];
      if (!head) return;
      if (head.held !== null) {
        const held = head.held;
        head.held = null;
        for (const copy of held) {
          this.heldBytes -= copy.length + HELD_NODE_OVERHEAD_BYTES;
          const cidEnd = 1 + (copy[0] ?? 0);
          const cid = CID.decode(copy.subarray(1, cidEnd));
          this.track(this.sink.put(cid, copy.subarray(cidEnd)));
        }
        this.wake();
      }
      if (!head.closed) return;
      this.lineHead += 1;
      // Slots passed are dropped once they are half the array, so it does not grow forever.
      if (this.lineHead >= 1024 && this.lineHead * 2 >= this.line.length) {
        this.line.splice(0, this.lineHead);
        this.lineHead = 0;
      }
    }
  }

  private track(written: void | Promise<void>): void {
    if (!written) return;
    const noted = written.catch((error: unknown) => {
      if (this.failed) return;
      this.failed = true;
      this.failure = error;
    });
    this.writes = this.writes.then(() => noted);
  }
}
