import { SlotHasher } from './slot-hasher.ts';

// Page-aligned buffers for writing files with O_DIRECT (direct-writer.ts), which takes
// data only from memory aligned to the disk's blocks. JavaScript cannot learn a Buffer's
// address, so the slots are views into one WebAssembly.Memory: V8 maps its pages for it alone,
// so it starts on a page boundary and every view at a multiple of 4096 bytes is aligned. The
// memory is shared, so that a worker can hash what a slot holds (slot-hasher.ts).

/** The alignment O_DIRECT asks of addresses, lengths and file offsets (a page, and 8 sectors). */
export const DIRECT_ALIGN = 4096;
/** One slot: a leaf as the spec cuts them (1 MiB), so a leaf goes out in one write. */
export const SLOT_BYTES = 1 << 20;
const WASM_PAGE_BYTES = 64 * 1024;

/** WebAssembly.Memory as used here: the project's TypeScript libraries do not declare it. */
interface WasmMemory {
  readonly buffer: SharedArrayBuffer;
}
const { Memory } = (
  globalThis as unknown as {
    WebAssembly: {
      Memory: new (limits: { initial: number; maximum: number; shared: true }) => WasmMemory;
    };
  }
).WebAssembly;

export class AlignedSlots {
  private readonly free: Uint8Array[] = [];
  /** Started at the first digest asked for. */
  private hasher: SlotHasher | undefined;

  private constructor(
    private readonly memory: WasmMemory,
    count: number,
  ) {
    for (let index = 0; index < count; index += 1)
      this.free.push(new Uint8Array(memory.buffer, index * SLOT_BYTES, SLOT_BYTES));
  }

  /**
   * `count` slots, or undefined where no such memory can be had (an address-space limit: V8
   * reserves more than it maps for WebAssembly). Files are then written through the page cache.
   */
  static tryCreate(count: number): AlignedSlots | undefined {
    const pages = (count * SLOT_BYTES) / WASM_PAGE_BYTES;
    let memory: WasmMemory;
    try {
      // Never grown: growing would detach the views handed out.
      memory = new Memory({ initial: pages, maximum: pages, shared: true });
    } catch {
      return undefined;
    }
    return new AlignedSlots(memory, count);
  }

  /** A free slot, or undefined when all are in use. */
  take(): Uint8Array | undefined {
    return this.free.pop();
  }

  give(slot: Uint8Array): void {
    this.free.push(slot);
  }

  /**
   * The SHA-256 of `view`, a view into one of these slots, hashed on a worker thread. The view's
   * bytes must not change until this settles.
   */
  digestOf(view: Uint8Array): Promise<Uint8Array> {
    this.hasher ??= new SlotHasher(this.memory.buffer);
    return this.hasher.digestOf(view);
  }

  /** Ends the hashing worker, if one was started; digests still waiting fail. */
  async close(): Promise<void> {
    await this.hasher?.close();
  }
}
