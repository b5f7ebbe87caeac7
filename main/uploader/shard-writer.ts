import { createHash } from 'node:crypto';
import { createReadStream, mkdirSync } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { CID } from 'multiformats/cid';
import { EngineError, isDiskFull } from '../api/index.ts';
import {
  encodeCarHeader,
  encodeCarSectionHead,
  RAW_CODEC,
  cidFromSha256,
  readCar,
} from '../protocol/index.ts';
import { CHUNK_BYTES } from '../packer/unixfs-settings.ts';
import { LeafShards } from './leaf-shards.ts';
import { shardHasRoom } from './shard-target.ts';

// Writes data blocks into staged shard files (CARv1, roots = [first block]) of at most
// `targetBytes` and MAX_SHARD_BLOCKS blocks, on disk, so memory does not grow with the data and
// a shard can be resent.

export interface StagedShard {
  readonly file: string;
  /** CIDv1 raw sha2-256 of the exact file bytes (§11.2). */
  readonly shardCid: CID;
  readonly bytes: number;
}

/** A full disk is a clear, final error: retrying in a loop would not free space (§2 R11). */
function stagingError(dir: string, error: unknown): unknown {
  if (isDiskFull(error)) {
    return new EngineError(
      'disk_full',
      `not enough free space in ${dir} to stage the backup; free some space and run it again`,
      { cause: error },
    );
  }
  return error;
}

const FLUSH_BYTES = 4 * 1024 * 1024;
/** Well under IOV_MAX (1024 on Linux), which bounds one writev. */
const FLUSH_BUFFERS = 512;
/** Blocks smaller than this are copied to wait for the next writev; larger ones are written. */
const COPY_BELOW_BYTES = 64 * 1024;

export class ShardWriter {
  private readonly dir: string;
  private readonly targetBytes: number;
  private current:
    | {
        handle: FileHandle;
        file: string;
        hash: ReturnType<typeof createHash>;
        bytes: number;
        blocks: number;
      }
    | undefined;
  /** The shards sealed, numbered by their index here. */
  readonly shards: StagedShard[] = [];
  readonly leafShards = new LeafShards();

  constructor(dir: string, targetBytes: number) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.dir = dir;
    this.targetBytes = targetBytes;
  }

  /**
   * Sections wait here and go to the file in one writev, so a shard of many small blocks costs
   * a few system calls rather than two per block.
   */
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;

  private write(bytes: Uint8Array): void {
    const current = this.current;
    if (!current) throw new Error('no shard open');
    current.hash.update(bytes);
    current.bytes += bytes.length;
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
  }

  private async flush(): Promise<void> {
    const current = this.current;
    if (!current || this.pending.length === 0) return;
    const buffers = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    let written = 0;
    const total = buffers.reduce((sum, buffer) => sum + buffer.length, 0);
    while (written < total) {
      // A short write is possible: resume after what went out.
      let skip = written;
      const rest: Uint8Array[] = [];
      for (const buffer of buffers) {
        if (skip >= buffer.length) skip -= buffer.length;
        else {
          rest.push(skip === 0 ? buffer : buffer.subarray(skip));
          skip = 0;
        }
      }
      written += (await current.handle.writev(rest)).bytesWritten;
    }
  }

  /** The packer makes several files' blocks at once; sections must not interleave, so adds queue. */
  private queue: Promise<void> = Promise.resolve();

  /** The first failed write; the writer refuses everything after it. */
  private failure: Error | undefined;

  /**
   * After a failed write (a full disk), closes the open shard file rather than leave its handle
   * to the garbage collector, which warns on the console, and fails every later add at once.
   */
  private async fail(error: unknown): Promise<never> {
    const reported = stagingError(path.dirname(this.dir), error);
    this.failure ??= reported instanceof Error ? reported : new Error(String(reported));
    const current = this.current;
    this.current = undefined;
    this.pending = [];
    this.pendingBytes = 0;
    // The write's error is the one to report; closing is cleanup, and its own error (if any)
    // says nothing more about the disk.
    if (current) await current.handle.close().catch(() => undefined);
    throw this.failure;
  }

  /**
   * Adds a block to the open shard; its bytes are needed only until the promise settles. `leaf`
   * is its number among the packed tree's leaves.
   */
  add(cid: CID, bytes: Uint8Array, leaf: number): Promise<void> {
    const next = this.queue
      .then(() => {
        if (this.failure !== undefined) throw this.failure;
        return this.append(cid, bytes, leaf);
      })
      .catch((error: unknown) => this.fail(error));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async append(cid: CID, bytes: Uint8Array, leaf: number): Promise<void> {
    if (this.current && !shardHasRoom(this.current, bytes.length, this.targetBytes))
      await this.sealCurrent();
    if (!this.current) {
      const file = path.join(this.dir, `shard-${String(this.shards.length).padStart(5, '0')}.car`);
      this.current = {
        handle: await open(file, 'w', 0o600),
        file,
        hash: createHash('sha256'),
        bytes: 0,
        blocks: 0,
      };
      this.write(encodeCarHeader([cid]));
    }
    this.write(encodeCarSectionHead(cid, bytes.length));
    // The packer lends a block's bytes until this add settles: a small block waits for the
    // writev as a copy, a large one goes to the file before the add returns.
    const large = bytes.length >= COPY_BELOW_BYTES;
    this.write(large ? bytes : new Uint8Array(bytes));
    this.current.blocks += 1;
    this.leafShards.record(leaf, this.shards.length);
    if (large || this.pendingBytes >= FLUSH_BYTES || this.pending.length >= FLUSH_BUFFERS)
      await this.flush();
  }

  /** Closes the open shard, fsynced, and records its CID, once queued blocks are written. */
  async seal(): Promise<void> {
    await this.queue;
    if (this.failure !== undefined) throw this.failure;
    try {
      await this.sealCurrent();
    } catch (error) {
      await this.fail(error);
    }
  }

  /**
   * Takes the blocks `cids` out of the sealed shard numbered `shard`: its file is written again
   * without them, and named anew. A shard that keeps none stays as it was, to hold no leaf and
   * never be needed.
   */
  async dropBlocks(shard: number, cids: ReadonlySet<string>): Promise<void> {
    const sealed = this.shards[shard];
    if (!sealed) throw new Error(`shard ${shard} is not sealed`);
    const kept = `${sealed.file}.kept`;
    const hash = createHash('sha256');
    let bytes = 0;
    try {
      const handle = await open(kept, 'w', 0o600);
      try {
        const blocks = readCar(createReadStream(sealed.file), { maxBlockBytes: CHUNK_BYTES });
        for await (const item of blocks) {
          if (item.type !== 'block' || cids.has(item.cid.toString())) continue;
          const parts = bytes === 0 ? [encodeCarHeader([item.cid])] : [];
          parts.push(encodeCarSectionHead(item.cid, item.length), ...item.pieces);
          for (const part of parts) {
            hash.update(part);
            bytes += part.length;
            await handle.writeFile(part);
          }
        }
        await handle.datasync();
      } finally {
        await handle.close();
      }
      if (bytes === 0) {
        await rm(kept);
        return;
      }
      await rename(kept, sealed.file);
    } catch (error) {
      await rm(kept, { force: true });
      throw stagingError(path.dirname(this.dir), error);
    }
    this.shards[shard] = {
      file: sealed.file,
      shardCid: cidFromSha256(RAW_CODEC, hash.digest()),
      bytes,
    };
  }

  private async sealCurrent(): Promise<void> {
    const current = this.current;
    if (!current) return;
    await this.flush();
    this.current = undefined;
    await current.handle.datasync();
    await current.handle.close();
    this.shards.push({
      file: current.file,
      shardCid: cidFromSha256(RAW_CODEC, current.hash.digest()),
      bytes: current.bytes,
    });
  }
}
