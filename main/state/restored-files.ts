import type { StateDb } from './database.ts';

// Files a restore wrote into a folder a bucket may back up (220-record-restored-files.sql), by
// their path below that folder. A restored file is new to the file index, its inode being new,
// yet its bytes are the leaves the restore wrote: while its size, mtime, ctime and inode stay as
// the restore left them, the next backup takes those leaves instead of reading it, as it would
// from the index (only those the bucket's active version holds). That backup's file index holds
// the files from then on, and their records go. A record from before ctimes were kept
// (230-record-change-times.sql) vouches for nothing.

export interface RestoredFile {
  /** Below the source folder, as the file index names it. */
  readonly path: string;
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly ino: bigint;
  /** Its leaves as a leaf list (main/packer/leaf-list.ts). */
  readonly leaves: Uint8Array;
}

interface Row {
  size: number;
  mtime_ns: string;
  /** Null in a record from before ctimes were recorded, which vouches for nothing. */
  ctime_ns: string | null;
  ino: string;
  leaves: Uint8Array;
}

export class RestoredFiles {
  private readonly select;
  private readonly upsert;

  private constructor(
    private readonly db: StateDb,
    private readonly bucketId: string,
    private readonly sourceDir: string,
  ) {
    this.select = db.prepare<[string, string, string], Row>(
      `SELECT size, mtime_ns, ctime_ns, ino, leaves FROM restored_files
       WHERE bucket_id = ? AND source_dir = ? AND path = ?`,
    );
    // A file restored again replaces its record, under a new id: clearThrough then keeps it.
    this.upsert = db.prepare<[string, string, string, number, string, string, string, Uint8Array]>(
      `INSERT OR REPLACE INTO restored_files (bucket_id, source_dir, path, size, mtime_ns, ctime_ns, ino, leaves)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
  }

  /** The restored files of `sourceDir` (an absolute path) backed up to bucket `bucketId`. */
  static of(db: StateDb, bucketId: string, sourceDir: string): RestoredFiles {
    return new RestoredFiles(db, bucketId, sourceDir);
  }

  /** Records `files` as restored, in one transaction (IMMEDIATE, as database.ts says why). */
  record(files: readonly RestoredFile[]): void {
    this.db
      .transaction(() => {
        for (const file of files)
          this.upsert.run(
            this.bucketId,
            this.sourceDir,
            file.path,
            file.size,
            file.mtimeNs.toString(),
            file.ctimeNs.toString(),
            file.ino.toString(),
            file.leaves,
          );
      })
      .immediate();
  }

  /**
   * The newest record's id, 0 when there is none: a backup takes it before it walks, and
   * clears the records up to it once its file index holds what it found.
   */
  newest(): number {
    return (
      this.db
        .prepare<[string, string], number | null>(
          'SELECT max(id) FROM restored_files WHERE bucket_id = ? AND source_dir = ?',
        )
        .pluck()
        .get(this.bucketId, this.sourceDir) ?? 0
    );
  }

  /** The restored file at `path`, if it is still as the restore left it (`found`). */
  unchangedAt(
    path: string,
    found: {
      readonly size: number;
      readonly mtimeNs: bigint;
      readonly ctimeNs: bigint;
      readonly ino: bigint;
    },
  ): RestoredFile | undefined {
    const row = this.select.get(this.bucketId, this.sourceDir, path);
    if (
      !row ||
      row.size !== found.size ||
      row.mtime_ns !== found.mtimeNs.toString() ||
      row.ctime_ns !== found.ctimeNs.toString() ||
      row.ino !== found.ino.toString()
    )
      return undefined;
    const { size, leaves } = row;
    return { path, size, mtimeNs: found.mtimeNs, ctimeNs: found.ctimeNs, ino: found.ino, leaves };
  }

  /**
   * Forgets the records of every other folder of this bucket but `keep` and those the bucket
   * is backed up from here (it keeps a file index of them): what an earlier restore of a whole
   * version into another folder noted, which no backup took.
   */
  forgetOtherTargets(keep: string | undefined): void {
    this.db
      .prepare<{ bucket: string; dir: string; keep: string | null }>(
        `DELETE FROM restored_files WHERE bucket_id = @bucket AND source_dir <> @dir
         AND source_dir IS NOT @keep
         AND source_dir NOT IN (SELECT source_dir FROM file_index_sources WHERE bucket_id = @bucket)`,
      )
      .run({ bucket: this.bucketId, dir: this.sourceDir, keep: keep ?? null });
  }

  /** Forgets the records up to id `newest`; those a restore made since stay. */
  clearThrough(newest: number): void {
    this.db
      .prepare<[string, string, number]>(
        'DELETE FROM restored_files WHERE bucket_id = ? AND source_dir = ? AND id <= ?',
      )
      .run(this.bucketId, this.sourceDir, newest);
  }
}
