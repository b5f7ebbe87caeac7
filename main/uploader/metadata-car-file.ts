import { open, rm, type FileHandle } from 'node:fs/promises';
import type { CID } from 'multiformats/cid';
import {
  cidFromSha256,
  CidTable,
  DAG_CBOR_CODEC,
  DAG_PB_CODEC,
  encodeCarHeader,
  encodeCarSectionHead,
} from '../protocol/index.ts';
import { nodeIndexFileOf } from '../state/index.ts';
import { NodeIndexWriter } from './tree-node-index.ts';
import { writeAllAt } from './write-all-at.ts';

// A version's metadata CAR (§17.2), written to a file as the packer makes each node. A tree of
// 100 000 files has about 16 MB of nodes; held until the tree was done, then sorted, made into
// a CAR in memory and copied into the request, they were the largest share of a backup's peak
// memory. Here a node costs 40 bytes while packing (to write it once), and the CAR is sent,
// and kept in the local metadata cache, from the file.
//
// The manifest is made last, so it is the CAR's last block; the header, which names it, is
// written over a placeholder of the same length once it is known (every CID §3 allows has
// the same length, so every header does). Nodes come in the order they are made.
//
// The index of its nodes is written beside it as it grows (tree-node-index.ts), so the version
// it is kept in the cache for is browsed at once. The index is only a shortcut: should writing
// it fail, it is dropped, and the first browse reads the CAR whole and writes it then.
//
// A metadata CAR may be at most 128 MiB (§14), about 800 000 files. The file refuses the node
// that would take it past its limit, so that a source too large for one version stops its
// backup there, rather than after every file was read and the push was refused.

const WRITE_BYTES = 1 << 20;

/** A manifest's CID (dag-cbor, sha2-256), for the length of the header that will name one. */
const PLACEHOLDER_MANIFEST = cidFromSha256(DAG_CBOR_CODEC, new Uint8Array(32));

/** The metadata CAR would be larger than its limit. */
export class MetadataOverLimit extends Error {
  constructor(readonly limitBytes: number) {
    super(`the metadata CAR would be larger than ${limitBytes} bytes`);
    this.name = 'MetadataOverLimit';
  }
}

export class MetadataCarFile {
  private readonly pending = Buffer.allocUnsafe(WRITE_BYTES);
  private used = 0;
  private written = 0;
  /** Bytes of the CAR so far, counting what waits to be written. */
  private size = 0;
  private readonly held = new CidTable(DAG_PB_CODEC);
  private closed = false;
  /** Writes run one after another: the packer makes several files' nodes at once. */
  private writing: Promise<void> = Promise.resolve();
  /** The first failed write: every later put, and finish, report it. */
  private failure: Error | undefined;

  private constructor(
    readonly file: string,
    private readonly handle: FileHandle,
    private readonly headerBytes: number,
    private readonly limitBytes: number,
    /** Undefined once it could not be written. */
    private index: NodeIndexWriter | undefined,
  ) {
    this.size = headerBytes;
  }

  /**
   * Creates `file`, which must not exist, for a CAR of at most `limitBytes`, and the index of
   * its nodes beside it (nodeIndexFileOf).
   */
  static async create(file: string, limitBytes = Infinity): Promise<MetadataCarFile> {
    const header = encodeCarHeader([PLACEHOLDER_MANIFEST]);
    const handle = await open(file, 'wx', 0o600);
    let index: NodeIndexWriter | undefined;
    try {
      index = await NodeIndexWriter.create(file);
    } catch {
      // Without it, the version is browsed once the CAR was read whole (see above).
    }
    const car = new MetadataCarFile(file, handle, header.length, limitBytes, index);
    try {
      await car.append(new Uint8Array(header.length));
    } catch (error) {
      await car.abandon();
      throw error;
    }
    return car;
  }

  /**
   * Adds a dag-pb node; one already added is written once. Rejects with MetadataOverLimit, as
   * every later put and finish do, once the CAR would pass its limit.
   */
  put(cid: CID, bytes: Uint8Array): Promise<void> {
    const before = this.held.size;
    this.held.add(cid);
    if (this.held.size === before) return this.writing;
    const head = encodeCarSectionHead(cid, bytes.length);
    const offset = this.size + head.length;
    const grown = this.grow(head.length + bytes.length);
    if (grown) return grown;
    return this.inTurn(async () => {
      await this.append(head);
      await this.append(bytes);
      const indexing = this.indexed((index) =>
        index.add(cid.multihash.digest, offset, bytes.length),
      );
      if (indexing) await indexing;
    });
  }

  /** Adds the manifest, writes the header that names it and closes the file. Returns its size. */
  async finish(manifestCid: CID, manifestBytes: Uint8Array): Promise<number> {
    try {
      await this.writing;
      if (this.failure !== undefined) throw this.failure;
      const head = encodeCarSectionHead(manifestCid, manifestBytes.length);
      const manifestOffset = this.size + head.length;
      await this.grow(head.length + manifestBytes.length);
      await this.append(head);
      await this.append(manifestBytes);
      await this.writeAll(this.pending.subarray(0, this.used), this.written);
      this.used = 0;
      const header = encodeCarHeader([manifestCid]);
      if (header.length !== this.headerBytes)
        throw new Error(
          `a CAR header of ${header.length} bytes where ${this.headerBytes} were kept`,
        );
      await this.writeAll(header, 0);
      const manifest = {
        offset: manifestOffset,
        length: manifestBytes.length,
        digest: manifestCid.multihash.digest,
      };
      await this.indexed((index) => index.finish(this.written, manifest));
      return this.written;
    } finally {
      await this.close();
      // An index finish did not reach is not whole.
      if (this.index && !this.index.finished) await this.dropIndex();
    }
  }

  /** Closes and removes the file, and its index: the pack it was for will not be pushed. */
  async abandon(): Promise<void> {
    await this.writing;
    await this.close();
    await this.dropIndex();
    await rm(nodeIndexFileOf(this.file), { force: true });
    await rm(this.file, { force: true });
  }

  /** Runs `write` on the index while there is one; one that fails drops the index. */
  private indexed(
    write: (index: NodeIndexWriter) => Promise<void> | undefined,
  ): Promise<void> | undefined {
    // Most nodes only add an entry in memory: no promise for them (a CAR has 100 000s).
    const writing = this.index ? write(this.index) : undefined;
    // Only a shortcut (see above): the CAR is what the backup needs.
    return writing?.catch(() => this.dropIndex());
  }

  /** Closes and removes the index, if there is one. */
  private async dropIndex(): Promise<void> {
    const index = this.index;
    this.index = undefined;
    try {
      await index?.abandon();
    } catch {
      // A file left in the staging folder goes with the next backup's leftovers.
    }
  }

  /**
   * Counts `bytes` more into the CAR; past its limit, the failure every later call reports,
   * returned rejected. Undefined when they fit.
   */
  private grow(bytes: number): Promise<never> | undefined {
    if (this.failure === undefined && this.size + bytes > this.limitBytes)
      this.failure = new MetadataOverLimit(this.limitBytes);
    if (this.failure !== undefined) return Promise.reject(this.failure);
    this.size += bytes;
    return undefined;
  }

  /** Runs `write` after the writes before it; after a failure, fails at once. */
  private inTurn(write: () => Promise<void>): Promise<void> {
    const turn = this.writing.then(async () => {
      if (this.failure !== undefined) throw this.failure;
      try {
        await write();
      } catch (error) {
        this.failure = error instanceof Error ? error : new Error(String(error));
        throw error;
      }
    });
    // The chain goes on past a failure, which each caller of put sees through its own turn.
    this.writing = turn.catch(() => undefined);
    return turn;
  }

  private async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close();
  }

  private async append(bytes: Uint8Array): Promise<void> {
    if (this.used + bytes.length > WRITE_BYTES && this.used > 0) {
      await this.writeAll(this.pending.subarray(0, this.used), this.written);
      this.used = 0;
    }
    if (bytes.length > WRITE_BYTES) await this.writeAll(bytes, this.written);
    else {
      this.pending.set(bytes, this.used);
      this.used += bytes.length;
    }
  }

  /** Writes all of `bytes` at `position`. */
  private async writeAll(bytes: Uint8Array, position: number): Promise<void> {
    await writeAllAt(this.handle, bytes, position);
    if (position + bytes.length > this.written) this.written = position + bytes.length;
  }
}
