import { closeSync, readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import type { ChunkHasher } from '../packer/chunk-hasher.ts';
import { CHUNK_BYTES } from '../packer/unixfs-settings.ts';
import { SMALL_FILE_BYTES } from '../packer/small-file.ts';
import { openSourceFile, openSourceHandle } from '../scanner/index.ts';
import {
  cidBytesOfText,
  encodeCarHeader,
  encodeCarSectionHead,
  sha256Of,
} from '../protocol/index.ts';
import type { PlannedBlock } from './shard-planner.ts';

// The body of a planned shard: its CAR, made as the connection takes it from the source files
// the blocks were packed from. Every block is checked against its CID before it goes out, so
// a file changed since packing stops the upload with `source_changed` and never sends bytes
// the version's tree does not describe.
//
// A large file's blocks are read and hashed on the chunk hasher's thread, as packing read them,
// and copied out of its slot: the check's SHA-256 was a quarter of all the hashing a backup to
// the embedded service did on the engine's thread, whose time a backup is bound by. Backups of
// the bench set: the engine's thread busy 5.7-5.8 s against 6.4-6.8 s; 5.8-7.0 s against
// 6.3-7.6 s in all (ten alternating pairs, faster in seven), with the worker's 8-10 MB more.

/** Bytes handed to the connection per pull: small blocks are gathered, large ones go alone. */
const PULL_BYTES = 1 << 20;

/**
 * Blocks of the plan held at once. A shard of small files holds hundreds of thousands of
 * blocks: all of them at once were 68 MB of a backup's heap for 400 000 files.
 */
const BLOCKS_PER_PAGE = 4096;

/**
 * A planned shard's blocks in order: up to `count` of them from position `from` (0 is the
 * first), fewer only at the end.
 */
export type PlannedBlockPages = (from: number, count: number) => readonly PlannedBlock[];

function sourceChanged(block: PlannedBlock, cause?: unknown): EngineError {
  return new EngineError(
    'source_changed',
    `${block.path} changed after it was read for this backup`,
    cause === undefined ? {} : { cause },
  );
}

/** A file that is gone or no longer readable changed too, as far as this backup can tell. */
function changedOrFailed(block: PlannedBlock, error: unknown): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  const changed = ['ENOENT', 'EACCES', 'EPERM', 'ELOOP', 'ENOTREGULAR'];
  return code !== undefined && changed.includes(code) ? sourceChanged(block, error) : error;
}

/** §3 CIDs end in their 32-byte sha2-256 digest. */
function digestMatches(cid: Buffer, digest: Uint8Array): boolean {
  return Buffer.from(digest).equals(cid.subarray(cid.length - 32));
}

export function plannedShardBody(
  sourceDir: string,
  blocksFrom: PlannedBlockPages,
  /** Reads and hashes large blocks off this thread while it has a slot free. */
  largeBlockHasher?: () => ChunkHasher,
): ReadableStream<Uint8Array> {
  let page = blocksFrom(0, BLOCKS_PER_PAGE);
  const first = page[0];
  if (!first) throw new Error('a shard holds at least one block');
  /** Where `page` starts in the shard, and the index in it of the next block to send. */
  let pageStart = 0;
  let next = 0;
  /** The next block to send, read from the plan when the page is used up; undefined at the end. */
  const peekBlock = (): PlannedBlock | undefined => {
    if (next === page.length && page.length === BLOCKS_PER_PAGE) {
      pageStart += page.length;
      page = blocksFrom(pageStart, BLOCKS_PER_PAGE);
      next = 0;
    }
    return page[next];
  };
  let headerSent = false;
  let cancelled = false;
  let pulling = false;
  /** The large file being read, kept open across its consecutive blocks. */
  let large: { path: string; handle: FileHandle } | undefined;

  const closeLarge = async (): Promise<void> => {
    const opened = large;
    large = undefined;
    await opened?.handle.close();
  };

  /** Reads a small block into `target` at `at`; returns the bytes read (short if it shrank). */
  const readSmallInto = (block: PlannedBlock, target: Buffer, at: number): number => {
    const fd = openSourceFile(path.join(sourceDir, block.path));
    try {
      let length = 0;
      while (length < block.length) {
        const count = readSync(
          fd,
          target,
          at + length,
          block.length - length,
          block.offset + length,
        );
        if (count === 0) break;
        length += count;
      }
      return length;
    } finally {
      closeSync(fd);
    }
  };

  /** Throws `source_changed` unless `length` bytes of digest `digest` are what was planned. */
  const checkRead = (
    block: PlannedBlock,
    cid: Buffer,
    length: number,
    digest: Uint8Array,
  ): void => {
    if (length !== block.length || !digestMatches(cid, digest)) throw sourceChanged(block);
  };

  const check = (block: PlannedBlock, cid: Buffer, bytes: Uint8Array): void => {
    checkRead(block, cid, bytes.length, sha256Of(bytes));
  };

  /** Reads a large block and checks it against `cid`. */
  const readLarge = async (block: PlannedBlock, cid: Buffer): Promise<Buffer> => {
    if (large?.path !== block.path) {
      await closeLarge();
      large = {
        path: block.path,
        handle: await openSourceHandle(path.join(sourceDir, block.path)),
      };
    }
    const hasher = block.length <= CHUNK_BYTES ? largeBlockHasher?.() : undefined;
    const slot = hasher?.tryTakeSlot();
    if (hasher && slot !== undefined) {
      try {
        const chunk = await hasher.read(large.handle.fd, block.offset, block.length, slot);
        checkRead(block, cid, chunk.bytes.length, chunk.digest);
        const bytes = Buffer.allocUnsafeSlow(block.length);
        bytes.set(chunk.bytes);
        return bytes;
      } finally {
        hasher.giveSlot(slot);
      }
    }
    const buffer = Buffer.allocUnsafeSlow(block.length);
    let length = 0;
    while (length < block.length) {
      const { bytesRead } = await large.handle.read(
        buffer,
        length,
        block.length - length,
        block.offset + length,
      );
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    const bytes = buffer.subarray(0, length);
    check(block, cid, bytes);
    return bytes;
  };

  /** The block's CID bytes: what its section starts with, and what its bytes must hash to. */
  const cidBytesOf = (block: PlannedBlock): Buffer => {
    const bytes = cidBytesOfText(block.cid);
    if (!bytes) throw new Error(`the upload plan holds a malformed CID: ${block.cid}`);
    return bytes;
  };

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        pulling = true;
        try {
          const parts: Uint8Array[] = [];
          let gathered = 0;
          if (!headerSent) {
            headerSent = true;
            const header = encodeCarHeader([CID.parse(first.cid)]);
            parts.push(header);
            gathered += header.length;
          }
          // Small blocks are read straight into one buffer, their section heads in between:
          // shards of tens of thousands of small files made that many buffers otherwise.
          let small: Buffer | undefined;
          let smallUsed = 0;
          /** Where the small blocks not yet among `parts` start in `small`. */
          let smallFlushed = 0;
          const flushSmall = (): void => {
            if (small && smallUsed > smallFlushed)
              parts.push(small.subarray(smallFlushed, smallUsed));
            smallFlushed = smallUsed;
          };
          for (
            let block = peekBlock();
            gathered < PULL_BYTES && block !== undefined;
            block = peekBlock()
          ) {
            next += 1;
            const cid = cidBytesOf(block);
            const head = encodeCarSectionHead({ bytes: cid }, block.length);
            if (block.length < SMALL_FILE_BYTES) {
              small ??= Buffer.allocUnsafeSlow(PULL_BYTES + SMALL_FILE_BYTES + 64);
              small.set(head, smallUsed);
              const at = smallUsed + head.length;
              let length: number;
              try {
                length = readSmallInto(block, small, at);
              } catch (error) {
                throw changedOrFailed(block, error);
              }
              check(block, cid, small.subarray(at, at + length));
              smallUsed = at + length;
              gathered += head.length + length;
            } else {
              flushSmall();
              let bytes: Buffer;
              try {
                bytes = await readLarge(block, cid);
              } catch (error) {
                // A failed check is `source_changed` already, and passes through as it is.
                throw changedOrFailed(block, error);
              }
              parts.push(head, bytes);
              gathered += head.length + bytes.length;
            }
          }
          flushSmall();
          // Done, or cancelled while a read was under way: nothing else would close the file.
          if (peekBlock() === undefined || cancelled) await closeLarge();
          if (gathered === 0) {
            controller.close();
            return;
          }
          for (const part of parts) controller.enqueue(part);
        } catch (error) {
          await closeLarge();
          throw error;
        } finally {
          pulling = false;
        }
      },
      cancel: async () => {
        cancelled = true;
        // A pull under way closes the file itself once its read is back: the hasher's thread
        // reads by descriptor, and a descriptor closed under it could be reused meanwhile.
        if (!pulling) await closeLarge();
      },
    },
    // One pull read ahead of the socket, no more.
    { highWaterMark: 1 },
  );
}
