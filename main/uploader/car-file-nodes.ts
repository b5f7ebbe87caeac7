import { closeSync, openSync, readSync } from 'node:fs';
import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { CidTable, cidText, DAG_PB_CODEC, sha256Of } from '../protocol/index.ts';

// The dag-pb nodes of a version's tree, read from its metadata CAR file as they are asked for,
// by where each one lies in the file. Held in memory instead (MetadataNodes), their bytes were
// about 60 MB of a restore of 400 000 files for as long as it ran; here a node costs its
// 32-byte digest, a table slot and two numbers.
//
// The file is read in chunks of 64 KiB, the last few kept: the nodes of one folder's files lie
// side by side (the packer writes them as it makes them), and a walk asks for them one after
// another. A system call per node made a restore of 100 000 small files 7-10 % slower.
//
// Each node read is checked against its CID where the nodes were put from the index kept in a
// file of its own (tree-node-index.ts): the CAR was checked whole when it was indexed, but not
// read again since, and it may have been damaged on the disk meanwhile.
//
// The file stays open until `close`. It may be renamed or removed meanwhile (a pulled CAR is
// moved into the metadata cache, a damaged cached one replaced): the nodes read are those of
// the file as it was indexed. Cached CARs are written once and never changed in place.

/** Bytes read from the file at once, at a multiple of this offset. */
const CHUNK_BYTES = 64 * 1024;
/** Chunks kept, the least recently used going first. */
const CHUNKS_KEPT = 16;

export class CarFileNodes {
  /** Chunks read, by their number (offset / CHUNK_BYTES), least recently used first. */
  private readonly chunks = new Map<number, Buffer>();
  private readonly cids: CidTable;
  /** (offset, length) of the node numbered n in `cids`, at 2n. */
  private readonly locations: number[] = [];
  private fd: number | undefined;

  private readonly checkReads: boolean;

  /**
   * `expected`, when known, is how many nodes will be put. `checkReads` false spares checking
   * each node read when the caller checked every node as it put it, reading this same file
   * whole: a cached CAR is never changed in place, and the descriptor keeps the file it opened.
   */
  constructor(
    private readonly file: string,
    options: { readonly expected?: number; readonly checkReads?: boolean } = {},
  ) {
    this.cids = new CidTable(DAG_PB_CODEC, options.expected ?? 0);
    this.checkReads = options.checkReads ?? true;
    this.fd = openSync(file, 'r');
  }

  /** Records where the node `cid` lies; a node already recorded is kept once. */
  put(cid: CID, offset: number, length: number): void {
    if (this.cids.add(cid) === this.locations.length / 2) this.locations.push(offset, length);
  }

  /** put, for a node given by its SHA-256 digest (a dag-pb CID's). */
  putDigest(digest: Uint8Array, offset: number, length: number): void {
    if (this.cids.addDigest(digest) === this.locations.length / 2)
      this.locations.push(offset, length);
  }

  /** The nodes' digests, one after another, and their (offset, length) at 2n: views. */
  get index(): { readonly digests: Uint8Array; readonly locations: readonly number[] } {
    return { digests: this.cids.allDigests(), locations: this.locations };
  }

  /** The bytes of the node `cid`, read from the file; undefined when it is not there. */
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

  /** Closes the file; the nodes cannot be read after. */
  close(): void {
    const fd = this.fd;
    this.fd = undefined;
    this.chunks.clear();
    if (fd !== undefined) closeSync(fd);
  }

  private at(index: number): Uint8Array | undefined {
    if (index < 0) return undefined;
    const offset = this.locations[index * 2] ?? 0;
    const length = this.locations[index * 2 + 1] ?? 0;
    const chunk = Math.floor(offset / CHUNK_BYTES);
    const within = offset - chunk * CHUNK_BYTES;
    // A copy: a view would keep the whole chunk alive for as long as the node's decoded links.
    const bytes =
      within + length <= CHUNK_BYTES
        ? Buffer.from(this.chunk(chunk, index).subarray(within, within + length))
        : this.read(offset, length, index);
    if (this.checkReads && !sha256Of(bytes).equals(this.cids.digestAt(index))) {
      throw new EngineError(
        'protocol',
        `the metadata in ${this.file} is damaged: node ${cidText(this.cids.cidAt(index))} does not match its CID`,
      );
    }
    return bytes;
  }

  /** Chunk number `chunk` of the file, read if it is not kept. */
  private chunk(chunk: number, index: number): Buffer {
    let bytes = this.chunks.get(chunk);
    if (bytes) {
      this.chunks.delete(chunk);
    } else {
      bytes = this.read(chunk * CHUNK_BYTES, CHUNK_BYTES, index, true);
      if (this.chunks.size >= CHUNKS_KEPT) {
        const [oldest] = this.chunks.keys();
        if (oldest !== undefined) this.chunks.delete(oldest);
      }
    }
    this.chunks.set(chunk, bytes);
    return bytes;
  }

  /**
   * `length` bytes from `offset`, for the node numbered `index`; fewer only at the file's end
   * when `upToEnd` (a chunk), which must still hold the node.
   */
  private read(offset: number, length: number, index: number, upToEnd = false): Buffer {
    const fd = this.fd;
    if (fd === undefined) throw new Error(`the nodes of ${this.file} were read after closing it`);
    const bytes = Buffer.allocUnsafe(length);
    let read = 0;
    while (read < length) {
      const count = readSync(fd, bytes, read, length - read, offset + read);
      if (count === 0) break;
      read += count;
    }
    const nodeEnd =
      (this.locations[index * 2] ?? 0) + (this.locations[index * 2 + 1] ?? 0) - offset;
    if (read < (upToEnd ? nodeEnd : length)) {
      throw new EngineError(
        'protocol',
        `the metadata in ${this.file} was cut short while it was read, at node ${cidText(this.cids.cidAt(index))}`,
      );
    }
    return read < length ? bytes.subarray(0, read) : bytes;
  }
}
