import type { StateDb } from './database.ts';

// The file index: per bucket and source folder, each entry as last backed up (kind, size,
// mtime, inode, mode, a symlink's target, a file's UnixFS node). Written whole after a version
// completed, so it never describes a version that is not stored.

export interface IndexedEntry {
  /** Relative to the source folder; '' is the folder itself. */
  readonly path: string;
  readonly kind: 'file' | 'directory' | 'symlink';
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ino: bigint;
  readonly mode: number;
  readonly target: string | null;
  /** A file's File node; null for folders and symlinks. */
  readonly cid: string | null;
}

export interface SourceFileIndex {
  /** The version the entries describe, or null when this source was never backed up here. */
  readonly versionId: string | null;
  readonly entryCount: number;
  lookup(relativePath: string): IndexedEntry | undefined;
  /** Replaces every entry of this source with those of `versionId`, in one transaction. */
  replace(versionId: string, entries: readonly IndexedEntry[]): void;
}

interface Row {
  path: string;
  kind: IndexedEntry['kind'];
  size: number;
  mtime_ns: string;
  ino: string;
  mode: number;
  target: string | null;
  cid: string | null;
}

export function sourceFileIndex(db: StateDb, bucketId: string, sourceDir: string): SourceFileIndex {
  const source = db
    .prepare<[string, string], { id: number; version_id: string; entry_count: number }>(
      'SELECT id, version_id, entry_count FROM file_index_sources WHERE bucket_id = ? AND source_dir = ?',
    )
    .get(bucketId, sourceDir);
  const select = db.prepare<[number, string], Row>(
    'SELECT path, kind, size, mtime_ns, ino, mode, target, cid FROM file_index WHERE source_id = ? AND path = ?',
  );
  return {
    versionId: source?.version_id ?? null,
    entryCount: source?.entry_count ?? 0,
    lookup(relativePath) {
      if (!source) return undefined;
      const row = select.get(source.id, relativePath);
      if (!row) return undefined;
      return {
        path: row.path,
        kind: row.kind,
        size: row.size,
        mtimeNs: BigInt(row.mtime_ns),
        ino: BigInt(row.ino),
        mode: row.mode,
        target: row.target,
        cid: row.cid,
      };
    },
    replace(versionId, entries) {
      db.transaction(() => {
        db.prepare('DELETE FROM file_index_sources WHERE bucket_id = ? AND source_dir = ?').run(
          bucketId,
          sourceDir,
        );
        const id = Number(
          db
            .prepare(
              'INSERT INTO file_index_sources (bucket_id, source_dir, version_id, entry_count) VALUES (?, ?, ?, ?)',
            )
            .run(bucketId, sourceDir, versionId, entries.length).lastInsertRowid,
        );
        const insert = db.prepare(
          'INSERT INTO file_index (source_id, path, kind, size, mtime_ns, ino, mode, target, cid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        );
        for (const entry of entries)
          insert.run(
            id,
            entry.path,
            entry.kind,
            entry.size,
            entry.mtimeNs.toString(),
            entry.ino.toString(),
            entry.mode,
            entry.target,
            entry.cid,
          );
      })();
    },
  };
}
