import type { CID } from 'multiformats/cid';
import { CidTable, cidText, DAG_PB_CODEC } from '../protocol/index.ts';

// The dag-pb nodes of a tree: one per file and folder, so tens of thousands, held while a tree
// is packed (until its metadata CAR is written) or read back (a version to build on, browse or
// restore). Each node kept as its own Uint8Array under its CID text cost about 1 KB of heap
// beyond its bytes; here the bytes share 1 MiB slabs, the CIDs a CidTable, and a node costs
// its 32-byte digest, a table slot and three numbers.

const SLAB_BYTES = 1 << 20;
/** Nodes larger than this get a slab of their own, so slabs are not left mostly empty. */
const LARGE_NODE_BYTES = SLAB_BYTES / 8;

export class MetadataNodes {
  private readonly slabs: Buffer[] = [];
  /** The slab small nodes go to, and how much of it they fill; -1 before the first. */
  private slabOfSmall = -1;
  private slabUsed = SLAB_BYTES;
  private readonly cids = new CidTable(DAG_PB_CODEC);
  /** (slab, offset, length) of the node numbered n in `cids`, at 3n. */
  private readonly locations: number[] = [];

  /** Keeps `bytes` as the node `cid`; a node already held is kept once. */
  put(cid: CID, bytes: Uint8Array): void {
    if (this.cids.has(cid)) return;
    let slab: number;
    let offset: number;
    if (bytes.length > LARGE_NODE_BYTES) {
      slab = this.slabs.push(Buffer.from(bytes)) - 1;
      offset = 0;
    } else {
      // Not simply the last slab: a large node's may have come since.
      if (this.slabOfSmall < 0 || this.slabUsed + bytes.length > SLAB_BYTES) {
        this.slabOfSmall = this.slabs.push(Buffer.allocUnsafe(SLAB_BYTES)) - 1;
        this.slabUsed = 0;
      }
      slab = this.slabOfSmall;
      offset = this.slabUsed;
      this.slabs[slab]?.set(bytes, offset);
      this.slabUsed += bytes.length;
    }
    this.cids.add(cid);
    this.locations.push(slab, offset, bytes.length);
  }

  get size(): number {
    return this.cids.size;
  }

  /** The bytes of the node `cid`, a view into its slab; undefined when not held. */
  get(cid: CID): Uint8Array | undefined {
    return this.at(this.cids.indexOf(cid));
  }

  /** Whether the node `cid` is held, without reading it. */
  has(cid: CID): boolean {
    return this.cids.has(cid);
  }

  /** get, for a CID's text. */
  getByText(text: string): Uint8Array | undefined {
    return this.at(this.cids.indexOfText(text));
  }

  /** Every node ordered by CID text, its CID made as it is read. */
  *sorted(): Generator<{ cid: CID; bytes: Uint8Array }> {
    const texts = Array.from({ length: this.cids.size }, (_, index) =>
      cidText(this.cids.cidAt(index)),
    );
    const order = Array.from(texts.keys()).sort((a, b) => {
      const left = texts[a] ?? '';
      const right = texts[b] ?? '';
      return left < right ? -1 : left > right ? 1 : 0;
    });
    for (const index of order) {
      const bytes = this.at(index);
      if (bytes) yield { cid: this.cids.cidAt(index), bytes };
    }
  }

  private at(index: number): Uint8Array | undefined {
    if (index < 0) return undefined;
    const offset = this.locations[index * 3 + 1] ?? 0;
    const length = this.locations[index * 3 + 2] ?? 0;
    return this.slabs[this.locations[index * 3] ?? -1]?.subarray(offset, offset + length);
  }
}
