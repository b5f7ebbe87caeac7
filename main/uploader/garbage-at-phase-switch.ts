import v8 from 'node:v8';
import vm from 'node:vm';

// A backup's switch from packing to uploading, where packing's garbage meets the upload's.
// V8 lets its heap grow to several times what is live before it collects: on a 4 GiB backup,
// packing's dead nodes and the push's buffers overlapped at the switch and set the process's
// peak memory. A full collection there ends the overlap in about 30 ms. But V8 sizes the heap
// after a forced collection tightly, and the upload, which churns through buffers, then ran a
// major collection every few megabytes (a 1.3 GiB backup: 150 instead of 4, and 20 % slower).
// So, for the upload, the heap may again grow to four times what is live, as it does before
// V8's first collections; V8's own sizing returns when no backup holds it. Making V8 collect
// more often throughout the backup instead cost it 8 to 20 % of its speed.
//
// Between packing and the upload (the push, and asking the host which blocks it lacks), the
// heap keeps the tight sizing of the collection before it: roomy there, it grew from 34 MB live
// to 131 MB of mostly garbage while 340 000 files' blocks were asked about, and set the peak
// of that backup (330 MB).
//
// A backup whose packing left the process holding little more than when it began (a few files
// changed) collects nothing: its garbage cannot raise the peak by more than that, and a full
// collection marks everything the process holds, however little of it the backup made. In the
// daemon or the app, whose heaps hold more than a backup's, each small backup paid two of
// them: a backup of six small files by an engine with its embedded service in one process
// took 170 ms of CPU time with them and 77 ms without.

/** The heap may grow to (100 + this) % of what is live; 0 gives V8 its own sizing back. */
const ROOMY_HEAP_GROWING_PERCENT = 300;
/** Growth since the attempt began below which a phase switch collects nothing. */
export const WORTH_COLLECTING_BYTES = 16 * 1024 * 1024;

let fullCollection: (() => void) | undefined;
let roomyHolders = 0;

/**
 * V8's `gc`, which it gives to contexts made after --expose-gc is set (the main context has
 * none), as Jest's leak detector gets it.
 */
function collectAll(): void {
  if (fullCollection === undefined) {
    v8.setFlagsFromString('--expose-gc');
    fullCollection = vm.runInNewContext('gc') as () => void;
  }
  fullCollection();
}

/** What the process holds in its heap and in buffers outside it, live or not yet collected. */
function heldBytes(): number {
  const heap = v8.getHeapStatistics();
  return heap.used_heap_size + heap.external_memory;
}

/**
 * One backup attempt's collections; made as the attempt begins, and `end` must be called when
 * it ends, however.
 */
export class GarbageAtPhaseSwitch {
  private roomy = false;
  /** Whether a collection has sized the heap tightly in this attempt. */
  private collected = false;
  private readonly heldAtStart = heldBytes();

  /** Collects everything dead now, and leaves the heap's sizing as it is. */
  collect(): void {
    if (!this.worthCollecting()) return;
    this.collected = true;
    collectAll();
  }

  /**
   * Collects everything dead now; until `end`, the heap is sized roomily, for the upload. After
   * a collection in this attempt, always: that collection sized the heap tightly.
   */
  collectForUpload(): void {
    if (!this.collected && !this.worthCollecting()) return;
    this.collected = true;
    if (!this.roomy) {
      this.roomy = true;
      roomyHolders += 1;
      // Set before collecting: the collection is what sizes the heap.
      if (roomyHolders === 1)
        v8.setFlagsFromString(`--heap-growing-percent=${ROOMY_HEAP_GROWING_PERCENT}`);
    }
    collectAll();
  }

  /** Whether the process holds enough more than when the attempt began for a collection. */
  private worthCollecting(): boolean {
    return heldBytes() - this.heldAtStart >= WORTH_COLLECTING_BYTES;
  }

  end(): void {
    if (!this.roomy) return;
    this.roomy = false;
    roomyHolders -= 1;
    if (roomyHolders === 0) v8.setFlagsFromString('--heap-growing-percent=0');
  }
}
