import { closeSync, openSync, rmSync } from 'node:fs';
import { EntryNotRestoredError } from './entry-not-restored.ts';
import { fsyncFully } from './file-writes.ts';
import type { FileSystemFlush } from './file-system-flush.ts';
import { refusalOf } from './refused-entry.ts';
import type { FileAsWritten } from './file-as-left.ts';
import { placeFile, type FilePlacing } from './place-file.ts';

// The files a restore wrote whole under temporary names, waiting to be renamed to their targets
// a batch at a time (restore-version.ts says why). A file is renamed only once it is on disk:
// fsynced itself, or covered by a flush of its file system started after it was written.

/** Written files, each fsynced, waiting for their renames, at most. */
const RENAME_BATCH = 64;
/**
 * Written files waiting for one flush of their file system, and their bytes, at most: a flush
 * costs a process start and a journal commit, and the files wait under temporary names meanwhile.
 */
const FLUSH_BATCH_FILES = 1000;
const FLUSH_BATCH_BYTES = 256 * 1024 * 1024;
/**
 * A written file waits for its batch at most this long. Over a slow link (10 MB/s), a batch of
 * 256 MiB took about 25 s to fill, and none of its files showed under its name meanwhile.
 */
const RENAME_WITHIN_MS = 2000;

/** A file written whole to its temporary name, waiting to be renamed to its target. */
export interface WrittenFile {
  readonly temporary: string;
  readonly target: string;
  readonly bytes: number;
  /** Whether it was fsynced itself; if not, it waits for a flush of its file system. */
  readonly synced: boolean;
  /** What it holds and how it was written, when the restore's caller wants restored files told. */
  readonly asWritten?: FileAsWritten;
  /** Whether its mode lost the set-user-ID and set-group-ID bits the version gave it. */
  readonly setIdBitsDropped?: true;
}

export interface UnrenamedFile extends WrittenFile {
  /** Its path below the target, for the list of what was not restored. */
  readonly relative: string;
  /** Its target's folded name (a disk may ignore case), by which it waits. */
  readonly folded: string;
}

/** What becomes of the files waiting, as their batches are renamed. */
export interface RenameOutcomes {
  /**
   * `file` is on disk under `placedAt`: its target, or a free name beside it when something
   * took the target's name while the file was written (place-file.ts).
   */
  renamed(file: UnrenamedFile, placedAt: string): void;
  /** The disk refused the name of the file at `relative`, for `reason`: it is not restored. */
  refused(relative: string, reason: string): void;
  /** A failure that stops the restore (a file that could not be made durable, say). */
  failed(error: unknown): void;
}

export class PendingRenames {
  /** Files written whole and waiting for their renames, by folded target name. */
  private readonly unrenamed = new Map<string, UnrenamedFile>();
  /** Files written, and bytes not fsynced, since the last batch was started. */
  private waitingFiles = 0;
  private waitingBytes = 0;
  /** Starts a batch RENAME_WITHIN_MS after the first file waiting for it was written. */
  private timer: NodeJS.Timeout | undefined;
  /** The batches started so far, each after the one before. */
  private renaming: Promise<void> = Promise.resolve();

  constructor(
    /** Flushes the target's file system; undefined, or once a flush failed: each file is fsynced. */
    private flush: FileSystemFlush | undefined,
    /** Files fsynced at once when they must be one by one. */
    private readonly fsyncsAtOnce: number,
    private readonly outcomes: RenameOutcomes,
    private readonly placing: FilePlacing,
  ) {}

  /**
   * Whether a flush of the file system covers files written in `folder`: if not, each is
   * fsynced as it is written. None does once a flush failed.
   */
  flushCovers(folder: string): boolean {
    return this.flush?.covers(folder) === true;
  }

  /** Whether a file of this folded name waits for its rename. */
  has(folded: string): boolean {
    return this.unrenamed.has(folded);
  }

  /**
   * Adds a file written whole. A batch starts once enough files (or bytes, for a flush) wait,
   * else RENAME_WITHIN_MS after the first of them was added.
   */
  add(file: UnrenamedFile): void {
    this.unrenamed.set(file.folded, file);
    this.waitingFiles += 1;
    if (!file.synced) this.waitingBytes += file.bytes;
    const batchFiles = file.synced ? RENAME_BATCH : FLUSH_BATCH_FILES;
    if (this.waitingFiles >= batchFiles || this.waitingBytes >= FLUSH_BATCH_BYTES)
      void this.renameWritten();
    else this.timer ??= setTimeout(() => void this.renameWritten(), RENAME_WITHIN_MS);
  }

  /**
   * Renames the files written so far to their targets, once they are on disk; settles when they
   * are renamed. It never rejects: a failure goes to `failed`, so that when this runs after an
   * error thrown elsewhere in the restore, that error is the one reported.
   */
  renameWritten(): Promise<void> {
    // Taken now: a flush started later covers every one of them.
    const batch = [...this.unrenamed.values()];
    this.waitingFiles = 0;
    this.waitingBytes = 0;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.renaming = this.renaming
      .then(() => this.renameBatch(batch))
      .catch((error: unknown) => this.outcomes.failed(error));
    return this.renaming;
  }

  /** Makes `batch` durable and renames its files, except those an earlier batch renamed. */
  private async renameBatch(batch: readonly UnrenamedFile[]): Promise<void> {
    const waiting = batch.filter((file) => this.unrenamed.get(file.folded) === file);
    const durable = await this.durableOf(waiting);
    for (const file of waiting) {
      this.unrenamed.delete(file.folded);
      if (!durable.has(file)) continue;
      try {
        const placedAt = this.renameToTarget(file);
        if (placedAt !== undefined) this.outcomes.renamed(file, placedAt);
      } catch (error) {
        this.outcomes.failed(error);
      }
    }
  }

  /**
   * The files of `files` that are on disk: all of them once a flush of the file system succeeds.
   * If it fails, its reason is not the restore's: each file is fsynced, which tells whether that
   * file reached the disk, and so is every file written after (flush is dropped).
   *
   * No more files than are fsynced at once are fsynced, not flushed: one round of fsyncs shares
   * a journal commit, as the flush does, and the first flush starts its shell, which held a
   * restore of a few files up some 20 ms while the kernel copied the restore's process (1.4 ms
   * for one file fsynced, 3.0 ms for 8 at once, on this project's ext4 machine).
   */
  private async durableOf(files: readonly UnrenamedFile[]): Promise<Set<UnrenamedFile>> {
    const durable = new Set(files.filter((file) => file.synced));
    const unsynced = files.filter((file) => !file.synced);
    if (unsynced.length === 0) return durable;
    if (this.flush && unsynced.length > this.fsyncsAtOnce) {
      try {
        await this.flush.flush();
        return new Set(files);
      } catch {
        this.flush = undefined;
      }
    }
    for (let at = 0; at < unsynced.length; at += this.fsyncsAtOnce) {
      const some = unsynced.slice(at, at + this.fsyncsAtOnce);
      const synced = await Promise.all(some.map((file) => this.fsyncWritten(file)));
      for (const [index, file] of some.entries()) if (synced[index]) durable.add(file);
    }
    return durable;
  }

  /** Fsyncs a written file anew; false (its temporary removed, the restore stopped) if it fails. */
  private async fsyncWritten(file: UnrenamedFile): Promise<boolean> {
    let fd: number | undefined;
    try {
      fd = openSync(file.temporary, 'r');
      await fsyncFully(fd);
      return true;
    } catch (error) {
      this.outcomes.failed(error);
      rmSync(file.temporary, { force: true });
      return false;
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }

  /**
   * Renames a written file to its target (or beside it: placeFile); the name it is under, or
   * undefined when the disk refuses the name (refused).
   */
  private renameToTarget(file: UnrenamedFile): string | undefined {
    try {
      return placeFile(file.temporary, file.target, this.placing);
    } catch (error) {
      rmSync(file.temporary, { force: true });
      const refusal = refusalOf(error, file.target, 'name');
      if (!(refusal instanceof EntryNotRestoredError)) throw error;
      this.outcomes.refused(file.relative, refusal.reason);
      return undefined;
    }
  }
}
