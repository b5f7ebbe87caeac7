import type { CID } from 'multiformats/cid';
import type { NodeSink } from './pack-source.ts';

// The order a tree's nodes reach its metadata CAR: each file's nodes at the file's place in
// the walk, each folder's right after everything under it (post-order), whatever order they
// are made in. The packer makes several files at once, and large files ahead of their turn,
// so the order they are made in differs from one backup to the next.
//
// The service keeps metadata CARs in content-defined chunks, stored once however many versions
// share them (§10). A later version copies the nodes of the folders it did not walk from the
// version before, in this same order (pack-source.ts, copyNodes); so the CAR of a version that
// changed one file has the bytes of the one before, but for the nodes of that file and of the
// folders above it, and the service stores little more than those.
//
// A slot holds one entry's nodes. Slots are placed in the tree's order; the first one still
// open writes straight to the sink, and those after it hold their nodes until it closes. The
// packer runs at most a bounded number of entries ahead, so the nodes held are bounded too.

interface HeldNode {
  readonly cid: CID;
  readonly bytes: Uint8Array;
}

export class NodeSlot implements NodeSink {
  /** Nodes put before this slot was the first open one; null once it was. */
  held: HeldNode[] | null = [];
  closed = false;
  placed = false;

  constructor(private readonly order: NodeOrder) {}

  /** Writes the node when this slot is first in line, else holds it until it is. */
  put(cid: CID, bytes: Uint8Array): void | Promise<void> {
    if (this.closed) throw new Error('a node was put in a closed slot');
    if (this.held === null) return this.order.write(cid, bytes);
    this.held.push({ cid, bytes });
    return undefined;
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

  constructor(private readonly sink: NodeSink) {}

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

  /** Writes what the slots at the head of the line held, up to the first one still open. */
  private advance(): void {
    for (;;) {
      const head = this.line[this.lineHead];
      if (!head) return;
      if (head.held !== null) {
        const held = head.held;
        head.held = null;
        for (const node of held) this.track(this.sink.put(node.cid, node.bytes));
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
