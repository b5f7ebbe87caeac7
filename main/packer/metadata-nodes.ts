import { CID } from 'multiformats/cid';

// The dag-pb nodes of a packed tree, held until the metadata CAR is written: one per file and
// folder, so tens of thousands. Each node kept as its own Uint8Array, with its CID object,
// cost about 1 KB of heap beyond its bytes (four typed arrays, each with its own buffer,
// plus the CID and digest objects); here the bytes share 1 MiB slabs, and a node costs its
// CID text, one map entry and three numbers.

const SLAB_BYTES = 1 << 20;
/** Nodes larger than this get a slab of their own, so slabs are not left mostly empty. */
const LARGE_NODE_BYTES = SLAB_BYTES / 8;

export class MetadataNodes {
  private readonly slabs: Buffer[] = [];
  private slabUsed = SLAB_BYTES;
  /** CID text → index of the node's (slab, offset, length) in `locations`. */
  private readonly index = new Map<string, number>();
  private readonly locations: number[] = [];

  /** Keeps `bytes` as the node whose CID text is `key`; a node already held is kept once. */
  put(key: string, bytes: Uint8Array): void {
    if (this.index.has(key)) return;
    let slab: number;
    let offset: number;
    if (bytes.length > LARGE_NODE_BYTES) {
      slab = this.slabs.push(Buffer.from(bytes)) - 1;
      offset = 0;
    } else {
      if (this.slabUsed + bytes.length > SLAB_BYTES) {
        this.slabs.push(Buffer.allocUnsafe(SLAB_BYTES));
        this.slabUsed = 0;
      }
      slab = this.slabs.length - 1;
      offset = this.slabUsed;
      this.slabs[slab]?.set(bytes, offset);
      this.slabUsed += bytes.length;
    }
    this.index.set(key, this.locations.length / 3);
    this.locations.push(slab, offset, bytes.length);
  }

  get size(): number {
    return this.index.size;
  }

  /** The bytes of the node `key`, a view into its slab; undefined when not held. */
  get(key: string): Uint8Array | undefined {
    const at = this.index.get(key);
    if (at === undefined) return undefined;
    const offset = this.locations[at * 3 + 1] ?? 0;
    const length = this.locations[at * 3 + 2] ?? 0;
    return this.slabs[this.locations[at * 3] ?? -1]?.subarray(offset, offset + length);
  }

  /** Every node ordered by CID text, its CID made as it is read. */
  *sorted(): Generator<{ cid: CID; bytes: Uint8Array }> {
    for (const key of [...this.index.keys()].sort()) {
      const bytes = this.get(key);
      if (bytes) yield { cid: CID.parse(key), bytes };
    }
  }
}
