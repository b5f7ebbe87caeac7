import type { StateDb } from './database.ts';

// The file index: per bucket and source folder, each entry as last backed up (kind, size,
// mtime, ctime, inode, mode, a symlink's target, a file's UnixFS node). Replaced whole after a version
// completed, so it never describes a version that is not stored: a backup stages its entries
// in the database as it packs them (holding them all in memory until the end cost about 22 MB
// per 100 000 files), and they become the index in one transaction.
//
// A backup looks entries up in the order its walk finds them, folder by folder. So a lookup
// reads the whole folder's entries in one query and keeps the last few folders: one query per
// entry cost about 20 µs, most of a rescan of 100 000 unchanged files. The walk goes depth
// first and comes back to each folder after each of its subfolders, so the folders above the
// one being read are kept whatever their size: dropping them as least recently used read a
// top folder of 4 000 subfolders again after every one of them, 16 million rows, and made a
// backup of 400 000 files with one change take 88 s instead of 31.

export interface IndexedEntry {
  /** Relative to the source folder; '' is the folder itself. */
  readonly path: string;
  readonly kind: 'file' | 'directory' | 'symlink';
  readonly size: number;
  readonly mtimeNs: bigint;
  /** When its inode last changed; null in an index from before it was recorded. */
  readonly ctimeNs: bigint | null;
  readonly ino: bigint;
  readonly mode: number;
  readonly target: string | null;
  /**
   * A file's File node, or a folder's node; null for symlinks, and for folders indexed before
   * their nodes were kept.
   */
  readonly cid: string | null;
  /** A folder's node's Tsize, as its parent links to it; null for files and symlinks. */
  readonly nodeSize: number | null;
  /**
   * A file's leaves (main/packer/leaf-list.ts); null for folders and symlinks, and for files
   * indexed before leaves were kept.
   */
  readonly leaves: Uint8Array | null;
}

/** Entries the next backup must not trust, left out when staged entries become the index. */
export interface UntrustedEntries {
  /** Paths whose recorded bytes may be torn. */
  readonly paths: readonly string[];
  /**
   * Files modified at or after this time (nanoseconds since the epoch), by their mtime and their
   * ctime both. A file dated ahead (an archive made on a computer whose clock ran ahead, a camera
   * set to the wrong year) whose ctime, which no program sets, is older than this, has not been
   * written to since: left out, it was read whole again by every backup until its date passed.
   */
  readonly filesModifiedFromNs: bigint;
}

/** The entries of a backup being made, for the index of this source once its version is stored. */
export interface StagedEntries {
  add(entry: IndexedEntry): void;
  /** Forgets every entry added so far: the source is being packed again. */
  clear(): void;
  /**
   * Drops the untrusted entries and records the stage, in the database, as the entries of
   * `versionId`: a pushed version whose upload may outlive this process. A later run that
   * finishes that upload adopts the stage (`SourceFileIndex.adoptStage`). Nothing may be
   * added after.
   */
  seal(versionId: string, untrusted: UntrustedEntries): void;
  /** The sealed stage describes `versionId` from now on: its version went on as that one. */
  reseal(versionId: string): void;
  /**
   * Replaces every entry of this source with those staged, but the untrusted, as the entries of
   * `versionId`, in one transaction. The stage is gone after. A sealed stage commits as sealed.
   */
  commit(versionId: string, untrusted: UntrustedEntries): void;
  /**
   * Keeps every entry under `folder` (not the folder itself) as the index holds it now, when
   * the stage commits: a folder found unchanged whole, whose entries were not walked. Staging
   * any entry under it is an error.
   */
  keepUnder(folder: string): void;
  /** Drops the stage and what it holds (nothing happens after a commit). */
  discard(): void;
}

/** The regular files somewhere under a folder, and their bytes. */
export interface FilesUnder {
  readonly files: number;
  readonly bytes: number;
}

/** A file the walk found, to look for elsewhere in the index. */
export interface MovedFileQuery {
  readonly path: string;
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly ino: bigint;
}

export interface SourceFileIndex {
  /**
   * The version the entries describe, or null when this source was never backed up here. It,
   * `entryCount` and `leavesRecorded` change when a stage is adopted.
   */
  readonly versionId: string | null;
  readonly entryCount: number;
  /** Every file of the index has its leaves; false for an index made before they were kept. */
  readonly leavesRecorded: boolean;
  lookup(relativePath: string): IndexedEntry | undefined;
  /**
   * The entry `found` had at another path, for a file whose folder was renamed or moved: a file
   * of the index with the same inode, name, size and mtime, and its File node. The name keeps a
   * file system that hands out inode numbers again (FAT, exFAT) from pairing two files.
   */
  movedFile(found: MovedFileQuery): IndexedEntry | undefined;
  /** How many entries the index holds right in `folder` ('' is the source folder). */
  entriesIn(folder: string): number;
  /** The files the index holds anywhere under `folder`. */
  filesUnder(folder: string): FilesUnder;
  /** Every file of the index, as its path and size (a sample's leaves). */
  files(): IterableIterator<[path: string, size: number]>;
  /**
   * A new stage for this source's next entries. A stage of this source still there was left by
   * a backup that never ended (a killed process): it is dropped.
   */
  stage(): StagedEntries;
  /**
   * Makes the stage sealed for `versionId` this source's index, once that version is stored
   * (an upload a killed run left, finished by this one). False when there is no such stage.
   */
  adoptStage(versionId: string): boolean;
  /**
   * The stage sealed for `fromVersionId` describes `toVersionId` from now on: its upload went
   * on as that version (StagedEntries.reseal, for a run that resumed it).
   */
  resealStage(fromVersionId: string, toVersionId: string): void;
}

interface Row {
  path: string;
  kind: IndexedEntry['kind'];
  size: number;
  mtime_ns: string;
  ctime_ns: string | null;
  ino: string;
  mode: number;
  target: string | null;
  cid: string | null;
  node_size: number | null;
  leaves: Uint8Array | null;
}

/**
 * Entries kept from folders read, besides the folders above the one being read; the least
 * recently used folders go first. Kept longer, entries outlive the young generation's
 * collections and pile up as garbage in the old one: 20 000 of them added about 15 MB to a
 * backup's peak.
 */
const CACHED_ENTRIES = 4096;
/** A folder with more entries than this is looked up entry by entry instead. */
const LARGEST_CACHED_FOLDER = 10_000;
/**
 * Entries kept at most, the folders above the one being read included: past it, as in a deep
 * chain of large folders, a folder is looked up entry by entry rather than kept.
 */
const MOST_CACHED_ENTRIES = 2 * LARGEST_CACHED_FOLDER;
/** Staged entries written to the database at once, in one transaction. */
const STAGED_PER_WRITE = 1000;

function entryOf(row: Row): IndexedEntry {
  return {
    path: row.path,
    kind: row.kind,
    size: row.size,
    mtimeNs: BigInt(row.mtime_ns),
    ctimeNs: row.ctime_ns === null ? null : BigInt(row.ctime_ns),
    ino: BigInt(row.ino),
    mode: row.mode,
    target: row.target,
    cid: row.cid,
    nodeSize: row.node_size,
    leaves: row.leaves,
  };
}

/** A row of `columns`, in that order, as `.raw()` gives it. */
type RawRow = [
  Row['path'],
  Row['kind'],
  Row['size'],
  Row['mtime_ns'],
  Row['ctime_ns'],
  Row['ino'],
  Row['mode'],
  Row['target'],
  Row['cid'],
  Row['node_size'],
  Row['leaves'],
];

function entryOfRaw([
  path,
  kind,
  size,
  mtimeNs,
  ctimeNs,
  ino,
  mode,
  target,
  cid,
  nodeSize,
  leaves,
]: RawRow): IndexedEntry {
  return {
    path,
    kind,
    size,
    mtimeNs: BigInt(mtimeNs),
    ctimeNs: ctimeNs === null ? null : BigInt(ctimeNs),
    ino: BigInt(ino),
    mode,
    target,
    cid,
    nodeSize,
    leaves,
  };
}

/** The folder an entry is in: '' for the top level, null for the source folder itself. */
export function folderOf(relativePath: string): string | null {
  if (relativePath === '') return null;
  return relativePath.slice(0, Math.max(0, relativePath.lastIndexOf('/')));
}

/**
 * The bounds of the paths under `folder` (not '') in the index's order, memcmp on UTF-8: from
 * `folder/` up to, not including, `folder0` ('0' follows '/').
 */
function pathsUnder(folder: string): [string, string] {
  return [`${folder}/`, `${folder}0`];
}

/** The last name of a path. */
function nameOf(relativePath: string): string {
  return relativePath.slice(relativePath.lastIndexOf('/') + 1);
}

/** Whether `folder` is `inner` or one of the folders above it ('' is above every folder). */
function isAboveOrSame(folder: string, inner: string): boolean {
  return folder === '' || folder === inner || inner.startsWith(`${folder}/`);
}

export function sourceFileIndex(db: StateDb, bucketId: string, sourceDir: string): SourceFileIndex {
  let source = sourceRow(db, bucketId, sourceDir);
  const columns = 'path, kind, size, mtime_ns, ctime_ns, ino, mode, target, cid, node_size, leaves';
  const selectEntry = db.prepare<[number, string], Row>(
    `SELECT ${columns} FROM file_index WHERE source_id = ? AND path = ?`,
  );
  // Rows as arrays: better-sqlite3 builds them faster than objects, and a folder read builds
  // thousands.
  const selectFolder = db
    .prepare<[number, string, number], RawRow>(
      `SELECT ${columns} FROM file_index INDEXED BY file_index_by_dir
       WHERE source_id = ? AND dir = ? LIMIT ?`,
    )
    .raw();
  const selectFiles = db
    .prepare<[number], [string, number]>(
      "SELECT path, size FROM file_index WHERE source_id = ? AND kind = 'file'",
    )
    .raw();
  const countFolder = db
    .prepare<[number, string], number>(
      'SELECT count(*) FROM file_index INDEXED BY file_index_by_dir WHERE source_id = ? AND dir = ?',
    )
    .pluck();
  // Hard links share an inode: a few rows are enough to find one of the same name.
  const selectByInode = db.prepare<[number, string], Row>(
    `SELECT ${columns} FROM file_index INDEXED BY file_index_by_ino
     WHERE source_id = ? AND ino = ? AND kind = 'file' LIMIT 16`,
  );
  const sumUnder = db.prepare<[number, string, string], { files: number; bytes: number }>(
    `SELECT count(*) AS files, coalesce(sum(size), 0) AS bytes FROM file_index
     WHERE source_id = ? AND path >= ? AND path < ? AND kind = 'file'`,
  );
  // Folder → its entries by path, in least recently used order; null for a folder too large
  // to keep. Each folder weighs one more than its entries, so empty ones are dropped too.
  const folders = new Map<string, Map<string, IndexedEntry> | null>();
  const weightOf = (entries: Map<string, IndexedEntry> | null): number => (entries?.size ?? 0) + 1;
  let cachedEntries = 0;

  function folderEntries(sourceId: number, folder: string): Map<string, IndexedEntry> | null {
    const cached = folders.get(folder);
    if (cached !== undefined) {
      folders.delete(folder);
      folders.set(folder, cached);
      return cached;
    }
    const rows = selectFolder.all(sourceId, folder, LARGEST_CACHED_FOLDER + 1);
    const kept = rows.length <= LARGEST_CACHED_FOLDER;
    // Room, from folders the walk has left: it comes back to those above.
    for (const [oldest, evicted] of folders) {
      if (cachedEntries + (kept ? rows.length : 0) < CACHED_ENTRIES) break;
      if (isAboveOrSame(oldest, folder)) continue;
      folders.delete(oldest);
      cachedEntries -= weightOf(evicted);
    }
    const entries =
      kept && cachedEntries + rows.length < MOST_CACHED_ENTRIES
        ? new Map(rows.map((row) => [row[0], entryOfRaw(row)] as const))
        : null;
    folders.set(folder, entries);
    cachedEntries += weightOf(entries);
    return entries;
  }

  /** After a stage became the index: what was read of the old one is stale. */
  const reload = (): void => {
    folders.clear();
    cachedEntries = 0;
    source = sourceRow(db, bucketId, sourceDir);
  };
  return {
    get versionId() {
      return source?.version_id ?? null;
    },
    get entryCount() {
      return source?.entry_count ?? 0;
    },
    get leavesRecorded() {
      return source?.leaves_recorded === 1;
    },
    lookup(relativePath) {
      if (!source) return undefined;
      const folder = folderOf(relativePath);
      const entries = folder === null ? null : folderEntries(source.id, folder);
      if (entries) return entries.get(relativePath);
      const row = selectEntry.get(source.id, relativePath);
      return row ? entryOf(row) : undefined;
    },
    movedFile(found) {
      if (!source) return undefined;
      const name = nameOf(found.path);
      const row = selectByInode
        .all(source.id, found.ino.toString())
        .find(
          (candidate) =>
            candidate.path !== found.path &&
            nameOf(candidate.path) === name &&
            candidate.size === found.size &&
            candidate.mtime_ns === found.mtimeNs.toString() &&
            candidate.cid !== null,
        );
      return row ? entryOf(row) : undefined;
    },
    entriesIn(folder) {
      if (!source) return 0;
      const cached = folders.get(folder);
      return cached ? cached.size : (countFolder.get(source.id, folder) ?? 0);
    },
    filesUnder(folder) {
      if (!source || folder === '') throw new Error('filesUnder takes a folder of the index');
      return sumUnder.get(source.id, ...pathsUnder(folder)) ?? { files: 0, bytes: 0 };
    },
    files() {
      return source ? selectFiles.iterate(source.id) : [][Symbol.iterator]();
    },
    stage() {
      return stageEntries(db, bucketId, sourceDir, source?.id ?? null, reload);
    },
    adoptStage(versionId) {
      if (!adoptSealedStage(db, bucketId, sourceDir, versionId)) return false;
      reload();
      return true;
    },
    resealStage(fromVersionId, toVersionId) {
      db.prepare(
        `UPDATE file_index_stages SET version_id = ?
         WHERE bucket_id = ? AND source_dir = ? AND version_id = ?`,
      ).run(toVersionId, bucketId, sourceDir, fromVersionId);
    },
  };
}

interface SourceRow {
  id: number;
  version_id: string;
  entry_count: number;
  leaves_recorded: number;
}

/** The folders `bucketId` keeps a file index of here, each by the path it was backed up from. */
export function indexedSourceDirs(db: StateDb, bucketId: string): string[] {
  return db
    .prepare<[string], string>(
      'SELECT source_dir FROM file_index_sources WHERE bucket_id = ? ORDER BY source_dir',
    )
    .pluck()
    .all(bucketId);
}

/** Every folder a bucket was backed up from here, with the bucket's id. */
export function everyIndexedSourceDir(db: StateDb): Array<{ bucketId: string; sourceDir: string }> {
  return db
    .prepare<[], { bucketId: string; sourceDir: string }>(
      'SELECT DISTINCT bucket_id AS bucketId, source_dir AS sourceDir FROM file_index_sources ORDER BY bucket_id, source_dir',
    )
    .all();
}

/** The folder whose file index here describes version `versionId` of bucket `bucketId`. */
export function sourceDirIndexing(
  db: StateDb,
  bucketId: string,
  versionId: string,
): string | undefined {
  return db
    .prepare<[string, string], string>(
      'SELECT source_dir FROM file_index_sources WHERE bucket_id = ? AND version_id = ? LIMIT 1',
    )
    .pluck()
    .get(bucketId, versionId);
}

function sourceRow(db: StateDb, bucketId: string, sourceDir: string): SourceRow | undefined {
  return db
    .prepare<[string, string], SourceRow>(
      'SELECT id, version_id, entry_count, leaves_recorded FROM file_index_sources WHERE bucket_id = ? AND source_dir = ?',
    )
    .get(bucketId, sourceDir);
}

function stageEntries(
  db: StateDb,
  bucketId: string,
  sourceDir: string,
  /** The source's current index, whose kept entries stay; null when there is none. */
  sourceId: number | null,
  onCommit: () => void,
): StagedEntries {
  const stageId = db
    .transaction(() => {
      db.prepare('DELETE FROM file_index_stages WHERE bucket_id = ? AND source_dir = ?').run(
        bucketId,
        sourceDir,
      );
      return Number(
        db
          .prepare('INSERT INTO file_index_stages (bucket_id, source_dir) VALUES (?, ?)')
          .run(bucketId, sourceDir).lastInsertRowid,
      );
    })
    .immediate();
  const insert = db.prepare(
    'INSERT INTO file_index_staged (stage_id, path, dir, kind, size, mtime_ns, ctime_ns, ino, mode, target, cid, node_size, leaves) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const pending: IndexedEntry[] = [];
  const write = db.transaction(() => {
    for (const entry of pending)
      insert.run(
        stageId,
        entry.path,
        folderOf(entry.path),
        entry.kind,
        entry.size,
        entry.mtimeNs.toString(),
        entry.ctimeNs?.toString() ?? null,
        entry.ino.toString(),
        entry.mode,
        entry.target,
        entry.cid,
        entry.nodeSize,
        entry.leaves,
      );
  });
  /** Folders whose entries under them stay as they are. */
  let kept: string[] = [];
  let sealedFor: string | null = null;
  const flush = (): void => {
    if (pending.length === 0) return;
    write.immediate();
    pending.length = 0;
  };
  const seal = (versionId: string, untrusted: UntrustedEntries): void => {
    if (sealedFor !== null) throw new Error('this stage is sealed already');
    flush();
    db.transaction(() => {
      const drop = db.prepare('DELETE FROM file_index_staged WHERE stage_id = ? AND path = ?');
      for (const torn of untrusted.paths) drop.run(stageId, torn);
      // Decimal text as SQLite casts it: nanoseconds since 1970 fit in 64 bits until 2262.
      // A row staged before ctimes were recorded (230-record-change-times.sql) has none.
      db.prepare(
        `DELETE FROM file_index_staged
         WHERE stage_id = ? AND kind = 'file' AND CAST(mtime_ns AS INTEGER) >= ?
           AND (ctime_ns IS NULL OR CAST(ctime_ns AS INTEGER) >= ?)`,
      ).run(stageId, untrusted.filesModifiedFromNs, untrusted.filesModifiedFromNs);
      db.prepare('UPDATE file_index_stages SET version_id = ?, kept_folders = ? WHERE id = ?').run(
        versionId,
        JSON.stringify(kept),
        stageId,
      );
    }).immediate();
    sealedFor = versionId;
  };
  return {
    add(entry) {
      if (sealedFor !== null) throw new Error('this stage is sealed');
      pending.push(entry);
      if (pending.length >= STAGED_PER_WRITE) flush();
    },
    keepUnder(folder) {
      if (sourceId === null || folder === '')
        throw new Error('keepUnder takes a folder of the index');
      kept.push(folder);
    },
    clear() {
      if (sealedFor !== null) throw new Error('this stage is sealed');
      pending.length = 0;
      kept = [];
      db.prepare('DELETE FROM file_index_staged WHERE stage_id = ?').run(stageId);
    },
    seal,
    reseal(versionId) {
      if (sealedFor === null) throw new Error('this stage is not sealed');
      db.prepare('UPDATE file_index_stages SET version_id = ? WHERE id = ?').run(
        versionId,
        stageId,
      );
      sealedFor = versionId;
    },
    commit(versionId, untrusted) {
      if (sealedFor === null) seal(versionId, untrusted);
      else if (sealedFor !== versionId) throw new Error(`this stage is sealed for ${sealedFor}`);
      commitStage(db, bucketId, sourceDir, stageId, versionId, kept);
      onCommit();
    },
    discard() {
      pending.length = 0;
      db.prepare('DELETE FROM file_index_stages WHERE id = ?').run(stageId);
    },
  };
}

/**
 * Replaces every entry of the source but those under `kept` with the stage's, as the entries
 * of `versionId`, in one transaction, and drops the stage.
 */
function commitStage(
  db: StateDb,
  bucketId: string,
  sourceDir: string,
  stageId: number,
  versionId: string,
  kept: readonly string[],
): void {
  const removeRange = db.prepare<[number, string, string]>(
    'DELETE FROM file_index WHERE source_id = ? AND path >= ? AND path < ?',
  );
  /**
   * Removes the source's entries but those under the kept folders: what was walked comes
   * again from the stage. One range between each two kept folders (in the index's order), so
   * the rows removed are those walked, not the whole index: copying the whole index into the
   * stage and back took about a second of a backup of 100 000 files with one change.
   */
  const removeAllBut = (id: number, keptFolders: readonly string[]): void => {
    // By their first path, in SQLite's order of text: its UTF-8 bytes (JavaScript's order of
    // UTF-16 differs). Not by the folders' names: `a.b/` comes before `a/`.
    const bounds = keptFolders
      .map(pathsUnder)
      .map((range) => ({ range, first: Buffer.from(range[0], 'utf8') }))
      .sort((a, b) => Buffer.compare(a.first, b.first))
      .map(({ range }) => range);
    let from = '';
    for (const [first, after] of bounds) {
      removeRange.run(id, from, first);
      from = after;
    }
    db.prepare('DELETE FROM file_index WHERE source_id = ? AND path >= ?').run(id, from);
  };
  db.transaction(() => {
    const id =
      sourceRow(db, bucketId, sourceDir)?.id ??
      Number(
        db
          .prepare(
            `INSERT INTO file_index_sources (bucket_id, source_dir, version_id, entry_count, leaves_recorded)
             VALUES (?, ?, '', 0, 1)`,
          )
          .run(bucketId, sourceDir).lastInsertRowid,
      );
    removeAllBut(id, kept);
    // Every file has its leaves: files indexed before leaves were kept sit in folders
    // indexed before their nodes were, which are never kept.
    db.prepare(
      'UPDATE file_index_sources SET version_id = ?, leaves_recorded = 1 WHERE id = ?',
    ).run(versionId, id);
    db.prepare(
      `INSERT INTO file_index (source_id, path, dir, kind, size, mtime_ns, ctime_ns, ino, mode, target, cid, node_size, leaves)
         SELECT ?, path, dir, kind, size, mtime_ns, ctime_ns, ino, mode, target, cid, node_size, leaves FROM file_index_staged
         WHERE stage_id = ?`,
    ).run(id, stageId);
    db.prepare(
      'UPDATE file_index_sources SET entry_count = (SELECT count(*) FROM file_index WHERE source_id = ?) WHERE id = ?',
    ).run(id, id);
    db.prepare('DELETE FROM file_index_stages WHERE id = ?').run(stageId);
  }).immediate();
}

/**
 * Commits the stage of this source sealed for `versionId`, if there is one; false otherwise.
 */
function adoptSealedStage(
  db: StateDb,
  bucketId: string,
  sourceDir: string,
  versionId: string,
): boolean {
  const stage = db
    .prepare<[string, string, string], { id: number; kept_folders: string }>(
      `SELECT id, kept_folders FROM file_index_stages
       WHERE bucket_id = ? AND source_dir = ? AND version_id = ?`,
    )
    .get(bucketId, sourceDir, versionId);
  if (!stage) return false;
  commitStage(
    db,
    bucketId,
    sourceDir,
    stage.id,
    versionId,
    JSON.parse(stage.kept_folders) as string[],
  );
  return true;
}
