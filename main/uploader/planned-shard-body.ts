import { createHash } from 'node:crypto';
import { closeSync, readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { SMALL_FILE_BYTES } from '../packer/small-file.ts';
import { openSourceFile, openSourceHandle } from '../scanner/index.ts';
import { cidBytesOfText, encodeCarHeader, encodeCarSectionHead } from '../protocol/index.ts';
import type { PlannedBlock } from './shard-planner.ts';

// The body of a planned shard: its CAR, made as the connection takes it from the source files
// the blocks were packed from. Every block is checked against its CID before it goes out, so
// a file changed since packing stops the upload with `source_changed` and never sends bytes
// the version's tree does not describe.

/** Bytes handed to the connection per pull: small blocks are gathered, large ones go alone. */
const PULL_BYTES = 1 << 20;

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

export function plannedShardBody(
  sourceDir: string,
  blocks: readonly PlannedBlock[],
  /** Bytes handed to the connection so far, after each pull. */
  onSent?: (sent: number) => void,
): ReadableStream<Uint8Array> {
  const first = blocks[0];
  if (!first) throw new Error('a shard holds at least one block');
  let next = 0;
  let sent = 0;
  let headerSent = false;
  let cancelled = false;
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

  const readLarge = async (block: PlannedBlock): Promise<Buffer> => {
    if (large?.path !== block.path) {
      await closeLarge();
      large = {
        path: block.path,
        handle: await openSourceHandle(path.join(sourceDir, block.path)),
      };
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
    return buffer.subarray(0, length);
  };

  /** The block's CID bytes: what its section starts with, and what its bytes must hash to. */
  const cidBytesOf = (block: PlannedBlock): Buffer => {
    const bytes = cidBytesOfText(block.cid);
    if (!bytes) throw new Error(`the upload plan holds a malformed CID: ${block.cid}`);
    return bytes;
  };

  const check = (block: PlannedBlock, cid: Buffer, bytes: Uint8Array): void => {
    const digest = createHash('sha256').update(bytes).digest();
    // §3 CIDs end in their 32-byte sha2-256 digest.
    if (bytes.length !== block.length || !digest.equals(cid.subarray(cid.length - 32)))
      throw sourceChanged(block);
  };

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
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
          while (gathered < PULL_BYTES && next < blocks.length) {
            const block = blocks[next] as PlannedBlock;
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
                bytes = await readLarge(block);
              } catch (error) {
                throw changedOrFailed(block, error);
              }
              check(block, cid, bytes);
              parts.push(head, bytes);
              gathered += head.length + bytes.length;
            }
          }
          flushSmall();
          // Done, or cancelled while a read was under way: nothing else would close the file.
          if (next >= blocks.length || cancelled) await closeLarge();
          if (gathered === 0) {
            controller.close();
            return;
          }
          for (const part of parts) controller.enqueue(part);
          sent += gathered;
          onSent?.(sent);
        } catch (error) {
          await closeLarge();
          throw error;
        }
      },
      cancel: async () => {
        cancelled = true;
        await closeLarge();
      },
    },
    // One pull read ahead of the socket, no more.
    { highWaterMark: 1 },
  );
}
