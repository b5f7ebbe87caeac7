import type { StateDb } from './database.ts';

// The file index: per bucket and source folder, each file's size, mtime, inode and mode as
// last backed up, with the CID of its UnixFS node. Written whole after a version completed, so
// it never describes a version that is not stored.

export interface IndexedFile {
  readonly path: string;
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ino: bigint;
  readonly mode: number;
  readonly cid: string;
}

export interface SourceFileIndex {
  /** The version the entries describe, or null when this source was never backed up here. */
  readonly versionId: string | null;
  lookup(relativePath: string): IndexedFile | undefined;
  /** Replaces every entry of this source with those of `versionId`, in one transaction. */
  replace(versionId: string, files: Iterable<IndexedFile>): void;
}

interface Row {
  path: string;
  size: number;
  mtime_ns: string;
  ino: string;
  mode: number;
  cid: string;
}

export function sourceFileIndex(db: StateDb, bucketId: string, sourceDir: string): SourceFileIndex {
  const source = db
    .prepare<[string, string], { id: number; version_id: string }>(
      'SELECT id, version_id FROM file_index_sources WHERE bucket_id = ? AND source_dir = ?',
    )
    .get(bucketId, sourceDir);
  const select = db.prepare<[number, string], Row>(
    'SELECT path, size, mtime_ns, ino, mode, cid FROM file_index WHERE source_id = ? AND path = ?',
  );
  return {
    versionId: source?.version_id ?? null,
    lookup(relativePath) {
      if (!source) return undefined;
      const row = select.get(source.id, relativePath);
      if (!row) return undefined;
      return {
        path: row.path,
        size: row.size,
        mtimeNs: BigInt(row.mtime_ns),
        ino: BigInt(row.ino),
        mode: row.mode,
        cid: row.cid,
      };
    },
    replace(versionId, files) {
      db.transaction(() => {
        db.prepare('DELETE FROM file_index_sources WHERE bucket_id = ? AND source_dir = ?').run(
          bucketId,
          sourceDir,
        );
        const id = Number(
          db
            .prepare(
              'INSERT INTO file_index_sources (bucket_id, source_dir, version_id) VALUES (?, ?, ?)',
            )
            .run(bucketId, sourceDir, versionId).lastInsertRowid,
        );
        const insert = db.prepare(
          'INSERT INTO file_index (source_id, path, size, mtime_ns, ino, mode, cid) VALUES (?, ?, ?, ?, ?, ?, ?)',
        );
        for (const file of files)
          insert.run(
            id,
            file.path,
            file.size,
            file.mtimeNs.toString(),
            file.ino.toString(),
            file.mode,
            file.cid,
          );
      })();
    },
  };
}
