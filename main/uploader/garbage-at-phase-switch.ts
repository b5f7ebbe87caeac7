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

/** The heap may grow to (100 + this) % of what is live; 0 gives V8 its own sizing back. */
const ROOMY_HEAP_GROWING_PERCENT = 300;

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

/** One backup attempt's collections; `end` must be called when the attempt ends, however. */
export class GarbageAtPhaseSwitch {
  private roomy = false;

  /** Collects everything dead now, and leaves the heap's sizing as it is. */
  collect(): void {
    collectAll();
  }

  /** Collects everything dead now; until `end`, the heap is sized roomily, for the upload. */
  collectForUpload(): void {
    if (!this.roomy) {
      this.roomy = true;
      roomyHolders += 1;
      // Set before collecting: the collection is what sizes the heap.
      if (roomyHolders === 1)
        v8.setFlagsFromString(`--heap-growing-percent=${ROOMY_HEAP_GROWING_PERCENT}`);
    }
    collectAll();
  }

  end(): void {
    if (!this.roomy) return;
    this.roomy = false;
    roomyHolders -= 1;
    if (roomyHolders === 0) v8.setFlagsFromString('--heap-growing-percent=0');
  }
}
