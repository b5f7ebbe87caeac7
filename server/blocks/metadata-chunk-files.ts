import { randomUUID } from 'node:crypto';
import { sha256Of } from '../../main/protocol/index.ts';
import {
  closeSync,
  fdatasyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { fsyncPath } from './fsync-path.ts';
import type { ChunkLocation } from '../store/metadata-chunks.ts';
import { MAX_CHUNK_BYTES, type ContentChunk } from './content-chunker.ts';
import { ownFileId } from './own-file-names.ts';

// The files that hold metadata CARs' chunks (store/metadata-chunks.ts): one per push that
// brought chunks the store lacked, holding those alone, in `metadata/chunks/`. Like a pack, a
// file is written in the staging folder, made durable, then renamed into place; one no chunk
// row names any more is retired beside the packs (block-store.ts), for the kept copy of the
// database that may still name it.

export const CHUNK_FILE_SUFFIX = '.chunks';

/** Whether stored chunks read back whole (MetadataChunkFiles.storedCopyCheck). */
export interface StoredCopyCheck {
  isSound(location: ChunkLocation): boolean;
  close(): void;
}
/** For write and storedCopyCheck, which are synchronous, so never used by two at once. */
const writeBuffer = Buffer.allocUnsafe(MAX_CHUNK_BYTES);
/** Files a pull keeps open at once. */
const OPEN_FILES = 16;

export class MetadataChunkFiles {
  constructor(
    readonly dir: string,
    private readonly stagingDir: string,
    private readonly retiredDir: string,
    readOnly: boolean,
  ) {
    if (!readOnly) mkdirSync(dir, { recursive: true });
  }

  /** File ids are UUIDs the server made, so they cannot escape the folder. */
  path(id: string): string {
    return path.join(this.dir, `${id}${CHUNK_FILE_SUFFIX}`);
  }

  /**
   * Copies `fresh`, chunks of the file `source`, into a new file, durable and in place when
   * this returns. Synchronous, to run inside the transaction that records them: a crash
   * before its commit leaves a file no row names, which removeOrphans removes.
   */
  write(source: string, fresh: readonly ContentChunk[]): { file: string; offsets: number[] } {
    const id = randomUUID();
    const staged = path.join(this.stagingDir, `${id}${CHUNK_FILE_SUFFIX}`);
    const buffer = writeBuffer;
    const offsets: number[] = [];
    const input = openSync(source, 'r');
    try {
      const output = openSync(staged, 'wx', 0o600);
      try {
        let length = 0;
        for (const chunk of fresh) {
          const bytes = buffer.subarray(0, chunk.length);
          if (readSync(input, bytes, 0, chunk.length, chunk.offset) !== chunk.length)
            throw new Error('the staged metadata CAR is shorter than its chunks');
          for (let at = 0; at < bytes.length;)
            at += writeSync(output, bytes, at, bytes.length - at);
          offsets.push(length);
          length += chunk.length;
        }
        fdatasyncSync(output);
      } finally {
        closeSync(output);
      }
      renameSync(staged, this.path(id));
      fsyncPath(this.dir);
    } catch (error) {
      rmSync(staged, { force: true });
      throw error;
    } finally {
      closeSync(input);
    }
    return { file: id, offsets };
  }

  /**
   * Copies `chunks` of the file `sourceId` into a new file, durable and in place when this
   * resolves; for compaction (chunk-file-compaction.ts), which records the copies after. The
   * bytes are copied as they lie: a chunk damaged on the disk stays so, for a pull to report.
   */
  async writeCopy(
    sourceId: string,
    chunks: readonly ChunkLocation[],
  ): Promise<{ file: string; offsets: number[] }> {
    const id = randomUUID();
    const staged = path.join(this.stagingDir, `${id}${CHUNK_FILE_SUFFIX}`);
    const offsets: number[] = [];
    const input = await open(this.path(sourceId), 'r');
    try {
      const output = await open(staged, 'wx', 0o600);
      try {
        let length = 0;
        for (const chunk of chunks) {
          const bytes = Buffer.allocUnsafe(chunk.length);
          const { bytesRead } = await input.read(bytes, 0, chunk.length, chunk.offset);
          if (bytesRead !== chunk.length)
            throw new Error(
              `metadata chunk ${chunk.digest.toString('hex')} is cut short on the disk`,
            );
          // As for packs (pack-compaction.ts): the old file goes, so only what is whole is copied.
          if (!sha256Of(bytes).equals(chunk.digest))
            throw new Error(
              `metadata chunk ${chunk.digest.toString('hex')} no longer matches its digest on the disk (damaged)`,
            );
          await output.write(bytes, 0, bytes.length, length);
          offsets.push(length);
          length += chunk.length;
        }
        await output.datasync();
      } finally {
        await output.close();
      }
      renameSync(staged, this.path(id));
      fsyncPath(this.dir);
    } catch (error) {
      rmSync(staged, { force: true });
      throw error;
    } finally {
      await input.close();
    }
    return { file: id, offsets };
  }

  /**
   * A check of stored chunks against their digests, for a push that names chunks the store
   * holds: whether the copy at `location` reads back whole. Synchronous, to run inside the
   * transaction that records the push; close() when done.
   */
  storedCopyCheck(): StoredCopyCheck {
    const fds = new Map<string, number>();
    const fdOf = (file: string): number => {
      let fd = fds.get(file);
      if (fd === undefined) {
        // A few files hold the chunks a push shares with the versions before it: each is
        // opened once, and a CAR whose chunks lie in more is not read with that many open.
        if (fds.size >= OPEN_FILES) {
          for (const open of fds.values()) closeSync(open);
          fds.clear();
        }
        fd = openSync(this.path(file), 'r');
        fds.set(file, fd);
      }
      return fd;
    };
    return {
      isSound(location) {
        const bytes = writeBuffer.subarray(0, location.length);
        try {
          if (
            readSync(fdOf(location.file), bytes, 0, location.length, location.offset) !==
            location.length
          )
            return false;
        } catch {
          // Unreadable (EIO, its file gone): as damaged, the copy that came takes its place.
          return false;
        }
        return sha256Of(bytes).equals(location.digest);
      },
      close() {
        for (const fd of fds.values()) closeSync(fd);
        fds.clear();
      },
    };
  }

  /** Removes a file whose rows did not commit after all. */
  removeUncommitted(id: string): void {
    rmSync(this.path(id), { force: true });
  }

  /**
   * Opens a file of chunks to read. One retired since the reader looked its chunks up (a
   * compaction moved them) is read where it was retired to: retired files stay until the
   * database is next copied (block-store.ts), long after any answer that started before.
   */
  private async openForRead(id: string): Promise<FileHandle> {
    try {
      return await open(this.path(id), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      try {
        return await open(path.join(this.retiredDir, `${id}${CHUNK_FILE_SUFFIX}`), 'r');
      } catch (retiredError) {
        // Gone from both: the file's own place is the one to name.
        if ((retiredError as NodeJS.ErrnoException).code === 'ENOENT') throw error;
        throw retiredError;
      }
    }
  }

  /** Moves a file no chunk row names to the retired files; gone already is fine. */
  retire(id: string): void {
    try {
      renameSync(this.path(id), path.join(this.retiredDir, `${id}${CHUNK_FILE_SUFFIX}`));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }

  /**
   * Removes files of its naming that no row names: a crash between a file's rename and its
   * commit. Files of other names stay (own-file-names.ts).
   */
  removeOrphans(known: ReadonlySet<string>): number {
    let removed = 0;
    for (const name of readdirSync(this.dir)) {
      const id = ownFileId(name, CHUNK_FILE_SUFFIX);
      if (id === undefined || known.has(id)) continue;
      rmSync(path.join(this.dir, name), { force: true });
      removed += 1;
    }
    return removed;
  }

  /**
   * The bytes of `chunks` in order, each checked against its digest. A chunk damaged on the
   * disk is told to `onDamaged` and handed out as the disk has it, as a CAR stored whole was:
   * the client checks every block of a pulled CAR against its CID, tells the user, and stores
   * a version in place of the damaged one (main/uploader/backup-input.ts), whose push writes
   * the damaged chunk again (store/metadata-chunks.ts). Cut short instead, the answer would
   * look like a network failure. A chunk shorter than recorded ends the stream with an error,
   * as the answer cannot have its stated length.
   */
  async *read(
    chunks: readonly ChunkLocation[],
    onDamaged: (chunk: ChunkLocation) => void,
  ): AsyncGenerator<Buffer> {
    const handles = new Map<string, FileHandle>();
    try {
      for (const chunk of chunks) {
        let handle = handles.get(chunk.file);
        if (!handle) {
          // A CAR of a long line of versions may have chunks in hundreds of files: a few open.
          const [oldest] = handles;
          if (oldest && handles.size >= OPEN_FILES) {
            handles.delete(oldest[0]);
            await oldest[1].close();
          }
          handle = await this.openForRead(chunk.file);
          handles.set(chunk.file, handle);
        }
        const bytes = Buffer.allocUnsafe(chunk.length);
        const { bytesRead } = await handle.read(bytes, 0, chunk.length, chunk.offset);
        if (bytesRead !== chunk.length)
          throw new Error(
            `metadata chunk ${chunk.digest.toString('hex')} is cut short on the disk`,
          );
        if (!sha256Of(bytes).equals(chunk.digest)) onDamaged(chunk);
        yield bytes;
      }
    } finally {
      for (const handle of handles.values()) await handle.close();
    }
  }
}
