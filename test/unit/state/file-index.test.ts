import { afterEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { openStateDatabase } from '../../../main/state/database.ts';
import { sourceFileIndex, type IndexedEntry } from '../../../main/state/file-index.ts';
import { indexVouchesFor } from '../../../main/uploader/unchanged-source.ts';

// The file index on a real SQLite file: lookups read a folder at a time, and must still give
// exactly each entry's own row, in any order, for any folder size, and after an upgrade from a
// database written before folders, or files' leaves, were recorded.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function stateFile(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-index-'));
  dirs.push(dir);
  return path.join(dir, 'state.sqlite');
}

function entry(relativePath: string, kind: IndexedEntry['kind'] = 'file', n = 1): IndexedEntry {
  return {
    path: relativePath,
    kind,
    size: kind === 'file' ? n : 0,
    mtimeNs: 1_700_000_000_123_456_789n + BigInt(n),
    ctimeNs: 1_800_000_000_987_654_321n + BigInt(n),
    ino: 2n ** 60n + BigInt(n),
    mode: kind === 'file' ? 0o644 : 0o755,
    target: kind === 'symlink' ? `../target-${n}` : null,
    cid: kind === 'symlink' ? null : `bafy-${kind}-${n}`,
    nodeSize: kind === 'directory' ? 1000 + n : null,
    // One to three leaves' digests, told apart by their bytes.
    leaves: kind === 'file' ? Buffer.alloc(32 * (1 + (n % 3)), n % 256) : null,
  };
}

/** An entry with its leaves as hex: vitest compares a Buffer byte by byte, slowly. */
function comparable(found: IndexedEntry | undefined) {
  return found && { ...found, leaves: found.leaves && Buffer.from(found.leaves).toString('hex') };
}

/** Folders nested, names that sort around '/', a symlink, a newline, and large folders. */
function sampleEntries(): IndexedEntry[] {
  const entries = [
    entry('', 'directory', 0),
    entry('a', 'directory', 1),
    entry('a/b', 'directory', 2),
    entry('a/b/c.txt', 'file', 3),
    entry('a.txt', 'file', 4),
    entry('a/z', 'file', 5),
    entry('x', 'directory', 6),
    entry('x/x', 'directory', 7),
    entry('x/x/x', 'symlink', 8),
    entry('x/line\nbreak', 'file', 9),
    entry('big', 'directory', 10),
  ];
  for (let i = 0; i < 12_000; i += 1) entries.push(entry(`big/f${i}`, 'file', 100 + i));
  // Three folders of 8 000: more than the lookups keep at once, so folders are dropped and read
  // again.
  for (const folder of ['mid0', 'mid1', 'mid2']) {
    entries.push(entry(folder, 'directory', 20_000));
    for (let i = 0; i < 8_000; i += 1)
      entries.push(entry(`${folder}/f${i}`, 'file', 30_000 + entries.length));
  }
  return entries;
}

/**
 * The paths of `entries` an index still holds, in their order, and its count of entries, once
 * migration `version` and those after it ran again on an index of them all: as on a database a
 * Canopy from before that migration left.
 */
function keptAfterMigration(
  version: number,
  entries: readonly IndexedEntry[],
): { kept: string[]; count: number } {
  const file = stateFile();
  let db = openStateDatabase(file);
  try {
    const staged = sourceFileIndex(db, 'bucket', '/src').stage();
    for (const indexed of entries) staged.add(indexed);
    staged.commit('v', { paths: [], filesModifiedFromNs: 2n ** 63n - 1n });
    db.prepare('DELETE FROM schema_migrations WHERE version >= ?').run(version);
  } finally {
    db.close();
  }
  db = openStateDatabase(file);
  try {
    const index = sourceFileIndex(db, 'bucket', '/src');
    return {
      kept: entries.map((indexed) => indexed.path).filter((at) => index.lookup(at) !== undefined),
      count: index.entryCount,
    };
  } finally {
    db.close();
  }
}

describe('the file index', () => {
  it('gives back each entry as recorded, looked up in any order, and nothing for unknown paths', () => {
    const db = openStateDatabase(stateFile());
    try {
      const entries = sampleEntries();
      const staged = sourceFileIndex(db, 'bucket', '/src').stage();
      for (const staging of entries) staged.add(staging);
      staged.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });
      const index = sourceFileIndex(db, 'bucket', '/src');
      expect(index.versionId).toBe('version-1');
      expect(index.entryCount).toBe(entries.length);
      expect(index.leavesRecorded).toBe(true);
      const shuffled = [...entries].reverse();
      for (const expected of [...entries, ...shuffled])
        expect(comparable(index.lookup(expected.path))).toEqual(comparable(expected));
      for (const unknown of ['b', 'a/b/c', 'a/b/c.txt/d', 'big/f12000', 'x/x/x/y', 'A'])
        expect(index.lookup(unknown)).toBeUndefined();
      expect(sourceFileIndex(db, 'bucket', '/other').lookup('a')).toBeUndefined();
      expect(sourceFileIndex(db, 'other', '/src').lookup('a')).toBeUndefined();
    } finally {
      db.close();
    }
  });

  it('finds a file moved elsewhere by its inode, name, size and mtime, and nothing else', () => {
    const db = openStateDatabase(stateFile());
    try {
      const photo = { ...entry('2024/trip/beach.jpg', 'file', 3), ino: 77n };
      // Hard links share the inode: the one of the same name is found.
      const linked = { ...entry('links/other name.jpg', 'file', 3), ino: 77n };
      const folder = { ...entry('2024/trip', 'directory', 4), ino: 78n };
      const staged = sourceFileIndex(db, 'bucket', '/src').stage();
      for (const staging of [entry('', 'directory', 0), linked, folder, photo]) staged.add(staging);
      staged.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });
      const index = sourceFileIndex(db, 'bucket', '/src');

      const moved = {
        path: 'archive/2024/trip/beach.jpg',
        size: 3,
        mtimeNs: photo.mtimeNs,
        ctimeNs: photo.ctimeNs ?? 0n,
        ino: 77n,
      };
      expect(comparable(index.movedFile(moved))).toEqual(comparable(photo));
      for (const other of [
        { ...moved, path: 'archive/renamed.jpg' },
        { ...moved, size: 4 },
        { ...moved, mtimeNs: photo.mtimeNs + 1n },
        { ...moved, ino: 79n },
        // Not moved: its own path's entry is the index's to give.
        { ...moved, path: photo.path },
        // A folder is not a file.
        { path: 'archive/trip', size: 0, mtimeNs: folder.mtimeNs, ctimeNs: 0n, ino: 78n },
      ])
        expect(index.movedFile(other)).toBeUndefined();
      expect(sourceFileIndex(db, 'bucket', '/other').movedFile(moved)).toBeUndefined();
    } finally {
      db.close();
    }
  });

  it('reads each folder once in a walk, however many subfolders the folders above it hold', () => {
    const db = openStateDatabase(stateFile());
    try {
      // A walk's order: a folder, then what it holds, depth first. The top folder holds more
      // subfolders than the lookups keep entries for, and the chain under `deep` holds three
      // folders of 9 000 entries, more than may be kept at once.
      const walk: IndexedEntry[] = [entry('', 'directory', 0)];
      for (let i = 0; i < 5_000; i += 1) {
        walk.push(entry(`s${i}`, 'directory', i));
        walk.push(entry(`s${i}/a`, 'file', i), entry(`s${i}/b`, 'file', i + 1));
      }
      const chain = ['deep', 'deep/d', 'deep/d/d'];
      walk.push(entry('deep', 'directory', 1));
      for (const [level, folder] of chain.entries()) {
        for (let i = 0; i < 9_000; i += 1) walk.push(entry(`${folder}/f${i}`, 'file', i));
        if (level < chain.length - 1) walk.push(entry(`${folder}/d`, 'directory', level));
      }
      const staged = sourceFileIndex(db, 'bucket', '/src').stage();
      for (const staging of walk) staged.add(staging);
      staged.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });

      // Counts the index's reads of a folder's entries.
      const folderReads = new Map<unknown, number>();
      const prepare = db.prepare.bind(db);
      vi.spyOn(db, 'prepare').mockImplementation((sql: string) => {
        const statement = prepare(sql);
        if (!sql.includes('dir = ?')) return statement;
        const all = statement.all.bind(statement);
        statement.all = (...params: unknown[]) => {
          folderReads.set(params[1], (folderReads.get(params[1]) ?? 0) + 1);
          return all(...params);
        };
        return statement;
      });
      const index = sourceFileIndex(db, 'bucket', '/src');
      // Lookups in the walk's order, each folder's entries interleaved with its subfolders'.
      for (const expected of walk)
        expect(comparable(index.lookup(expected.path))).toEqual(comparable(expected));
      expect(folderReads.size).toBe(1 + 5_000 + chain.length);
      expect([...folderReads.values()].every((reads) => reads === 1)).toBe(true);
    } finally {
      vi.restoreAllMocks();
      db.close();
    }
  });

  it('keeps its entries until a stage commits, and keeps no stage a killed backup left', () => {
    const file = stateFile();
    const db = openStateDatabase(file);
    try {
      const index = () => sourceFileIndex(db, 'bucket', '/src');
      const first = index().stage();
      first.add(entry('', 'directory', 0));
      first.add(entry('kept.txt', 'file', 1));
      first.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });
      // A backup packs twice (a file changed while read) and then fails: nothing changes.
      const failed = index().stage();
      for (let i = 0; i < 2500; i += 1) failed.add(entry(`gone/${i}`, 'file', i));
      failed.clear();
      failed.add(entry('other.txt', 'file', 2));
      failed.discard();
      expect(index().versionId).toBe('version-1');
      expect(comparable(index().lookup('kept.txt'))).toEqual(
        comparable(entry('kept.txt', 'file', 1)),
      );
      expect(index().lookup('other.txt')).toBeUndefined();
      // A process killed mid-backup never discards; the next stage of the source drops it.
      const killed = index().stage();
      for (let i = 0; i < 1500; i += 1) killed.add(entry(`k/${i}`, 'file', i));
      const next = index().stage();
      next.add(entry('', 'directory', 0));
      // Untrusted: a torn path and a file modified at the limit are left out, not the folder.
      next.add(entry('torn.txt', 'file', 3));
      next.add(entry('racy.txt', 'file', 6));
      next.add(entry('settled.txt', 'file', 5));
      const racyFrom = entry('racy.txt', 'file', 6).mtimeNs;
      // Dated ahead, but not written to since long before: its ctime says so.
      next.add({ ...entry('ahead.txt', 'file', 7), mtimeNs: 2n ** 62n, ctimeNs: racyFrom - 1n });
      next.commit('version-2', { paths: ['torn.txt'], filesModifiedFromNs: racyFrom });
      expect(index().versionId).toBe('version-2');
      expect(index().entryCount).toBe(3);
      expect(
        ['', 'kept.txt', 'torn.txt', 'racy.txt', 'settled.txt', 'ahead.txt', 'k/1'].map(
          (p) => index().lookup(p)?.path,
        ),
      ).toEqual(['', undefined, undefined, undefined, 'settled.txt', 'ahead.txt', undefined]);
      expect(db.prepare('SELECT count(*) AS n FROM file_index_staged').get()).toEqual({ n: 0 });
      expect(db.prepare('SELECT count(*) AS n FROM file_index_stages').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });

  it('adopts a stage sealed for a version in a later process once that version is stored, and no other', () => {
    const file = stateFile();
    const first = openStateDatabase(file);
    try {
      const staged = sourceFileIndex(first, 'bucket', '/src').stage();
      for (const staging of [entry('', 'directory', 0), entry('a', 'directory', 1)])
        staged.add(staging);
      staged.add(entry('a/kept.txt', 'file', 2));
      staged.add(entry('old.txt', 'file', 3));
      staged.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });
      // The next backup keeps `a` whole, finds `old.txt` gone and two new files, one torn.
      const next = sourceFileIndex(first, 'bucket', '/src').stage();
      next.add(entry('', 'directory', 0));
      next.add(entry('a', 'directory', 1));
      next.keepUnder('a');
      next.add(entry('new.txt', 'file', 4));
      next.add(entry('torn.txt', 'file', 5));
      next.seal('version-2', { paths: ['torn.txt'], filesModifiedFromNs: 2n ** 62n });
      expect(() => next.add(entry('late.txt', 'file', 6))).toThrow(/sealed/);
      // The process dies during the upload: the index still describes version 1.
    } finally {
      first.close();
    }
    const db = openStateDatabase(file);
    try {
      const index = sourceFileIndex(db, 'bucket', '/src');
      expect(index.versionId).toBe('version-1');
      // Another version was what got stored: the stage is not this one's.
      expect(index.adoptStage('version-3')).toBe(false);
      expect(index.versionId).toBe('version-1');
      expect(index.lookup('old.txt')?.path).toBe('old.txt');
      // Version 2's upload is finished: its stage becomes the index, in this same object.
      expect(index.adoptStage('version-2')).toBe(true);
      expect(index.versionId).toBe('version-2');
      expect(index.entryCount).toBe(4);
      expect(
        ['', 'a', 'a/kept.txt', 'new.txt', 'old.txt', 'torn.txt'].map((p) => index.lookup(p)?.path),
      ).toEqual(['', 'a', 'a/kept.txt', 'new.txt', undefined, undefined]);
      expect(sourceFileIndex(db, 'bucket', '/src').versionId).toBe('version-2');
      expect(db.prepare('SELECT count(*) AS n FROM file_index_stages').get()).toEqual({ n: 0 });
      expect(db.prepare('SELECT count(*) AS n FROM file_index_staged').get()).toEqual({ n: 0 });
      // Adopted once: a second try finds nothing.
      expect(index.adoptStage('version-2')).toBe(false);
    } finally {
      db.close();
    }
  });

  it("counts a folder's entries and the files under it, and stages a folder's entries as they are", () => {
    const db = openStateDatabase(stateFile());
    try {
      const entries = sampleEntries();
      const staged = sourceFileIndex(db, 'bucket', '/src').stage();
      for (const staging of entries) staged.add(staging);
      staged.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });
      const index = sourceFileIndex(db, 'bucket', '/src');
      // Right in the folder only; `big` is too large to be kept, and is counted all the same.
      expect(
        ['', 'a', 'a/b', 'x', 'big', 'mid1', 'a/z', 'nowhere'].map((folder) =>
          index.entriesIn(folder),
        ),
      ).toEqual([7, 2, 1, 2, 12_000, 8_000, 0, 0]);
      // Files at any depth; `a.txt` sorts between `a` and `a/…` and is not under `a`.
      expect(index.filesUnder('a')).toEqual({ files: 2, bytes: 3 + 5 });
      expect(index.filesUnder('x')).toEqual({ files: 1, bytes: 9 });
      expect(index.filesUnder('a/b/c.txt')).toEqual({ files: 0, bytes: 0 });

      // The next backup walks the source folder and `a`, and keeps what is under `a` as it was.
      const next = index.stage();
      next.add(entry('', 'directory', 0));
      next.add(entry('a', 'directory', 1));
      next.keepUnder('a');
      next.commit('version-2', { paths: [], filesModifiedFromNs: 2n ** 62n });
      const after = sourceFileIndex(db, 'bucket', '/src');
      expect(after.entryCount).toBe(5);
      for (const kept of entries.slice(0, 4).concat(entries[5] ?? []))
        expect(comparable(after.lookup(kept.path))).toEqual(comparable(kept));
      expect(['a.txt', 'x', 'x/x', 'big/f1'].map((p) => after.lookup(p))).toEqual([
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
    } finally {
      db.close();
    }
  });

  it('keeps the entries under kept folders whatever their names, and replaces all others', () => {
    const db = openStateDatabase(stateFile());
    try {
      // Names around the bounds of a folder's range: `a.b/` and `a b/` sort before `a/`, and
      // U+E000 before U+1F600 in UTF-8 (JavaScript's UTF-16 order has them the other way).
      const folders = ['a', 'a.b', 'a b', '\uE000', '\u{1F600}', 'z'];
      const first: IndexedEntry[] = [entry('', 'directory', 0), entry('a.txt', 'file', 1)];
      for (const [n, folder] of folders.entries()) {
        first.push(entry(folder, 'directory', 10 * n));
        first.push(entry(`${folder}/f0`, 'file', 10 * n + 1));
        first.push(entry(`${folder}/sub`, 'directory', 10 * n + 2));
        first.push(entry(`${folder}/sub/f1`, 'file', 10 * n + 3));
      }
      const staged = sourceFileIndex(db, 'bucket', '/src').stage();
      for (const staging of first) staged.add(staging);
      staged.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });

      // The next backup keeps four folders (told in walk order), walks `a b` and `z` again,
      // and finds a top file gone, one new, and `z/f0` gone.
      const keptFolders = ['a', 'a.b', '\uE000', '\u{1F600}'];
      const next = sourceFileIndex(db, 'bucket', '/src').stage();
      next.add(entry('', 'directory', 0));
      next.add(entry('new.txt', 'file', 2));
      for (const folder of keptFolders) {
        next.add(entry(folder, 'directory', 100));
        next.keepUnder(folder);
      }
      next.add(entry('a b', 'directory', 101));
      next.add(entry('z', 'directory', 102));
      next.add(entry('z/sub', 'directory', 103));
      next.add(entry('z/sub/f1', 'file', 104));
      next.commit('version-2', { paths: [], filesModifiedFromNs: 2n ** 62n });

      const index = sourceFileIndex(db, 'bucket', '/src');
      expect(index.versionId).toBe('version-2');
      const under = first.filter((e) =>
        keptFolders.some((folder) => e.path.startsWith(`${folder}/`)),
      );
      expect(under).toHaveLength(12);
      for (const kept of under)
        expect(comparable(index.lookup(kept.path))).toEqual(comparable(kept));
      for (const folder of keptFolders)
        expect(comparable(index.lookup(folder))).toEqual(
          comparable(entry(folder, 'directory', 100)),
        );
      expect(comparable(index.lookup('z/sub/f1'))).toEqual(
        comparable(entry('z/sub/f1', 'file', 104)),
      );
      for (const gone of ['a.txt', 'a b/f0', 'a b/sub', 'a b/sub/f1', 'z/f0'])
        expect(index.lookup(gone)).toBeUndefined();
      // The source folder, new.txt, 4 kept folders and their 12 entries, `a b`, z, z/sub, z/sub/f1.
      expect(index.entryCount).toBe(2 + 4 + 12 + 4);
    } finally {
      db.close();
    }
  });

  it('forgets, once, the entries dated from 2038 to 2106, whose nodes were packed with a wrong time', () => {
    const seconds = (secs: bigint): bigint => secs * 1_000_000_000n;
    const dated = {
      '': seconds(1_700_000_000n),
      'before 2038': seconds(2_147_483_647n) + 999_999_999n,
      'from 2038': seconds(2_147_483_648n),
      'in 2100': seconds(4_102_444_800n) + 1n,
      'last before 2106': seconds(4_294_967_295n) + 999_999_999n,
      'from 2106': seconds(4_294_967_296n),
      'before 1970': -seconds(3_000_000_000n),
    };
    const entries = Object.entries(dated).map(([name, mtimeNs]) => ({
      ...entry(name, name === '' ? 'directory' : 'file', 1),
      mtimeNs,
    }));
    expect(keptAfterMigration(240, entries)).toEqual({
      kept: ['', 'before 2038', 'from 2106', 'before 1970'],
      count: 4,
    });
  });

  it('forgets, once, the files of 2 to 4 GiB, whose nodes were packed with a size of 0', () => {
    const GiB = 2 ** 30;
    const TiB = 2 ** 40;
    const sized = {
      'just under 2 GiB': 2 * GiB - 1,
      '2 GiB': 2 * GiB,
      '3 GiB': 3 * GiB,
      'just under 4 GiB': 4 * GiB - 1,
      '4 GiB': 4 * GiB,
      '1 TiB and 3 GiB': TiB + 3 * GiB,
      '1 TiB and 5 GiB': TiB + 5 * GiB,
    };
    const entries = [
      entry('', 'directory', 0),
      ...Object.entries(sized).map(([name, size]) => ({ ...entry(name), size })),
    ];
    expect(keptAfterMigration(250, entries)).toEqual({
      kept: ['', 'just under 2 GiB', '4 GiB', '1 TiB and 5 GiB'],
      count: 4,
    });
  });

  it('finds the entries of a database written before the folder, leaves and ctime columns existed', () => {
    const file = stateFile();
    // The schema as it was before migration 070, with one source indexed.
    const old = new Database(file);
    old.exec(
      'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    const migrations = path.join(import.meta.dirname, '../../../main/state/migrations');
    for (const name of readdirSync(migrations).sort()) {
      const version = Number(name.slice(0, 3));
      if (version >= 70) continue;
      old.exec(readFileSync(path.join(migrations, name), 'utf8'));
      old.prepare('INSERT INTO schema_migrations VALUES (?, 0)').run(version);
    }
    const sourceId = old
      .prepare(
        "INSERT INTO file_index_sources (bucket_id, source_dir, version_id, entry_count) VALUES ('bucket', '/src', 'v', 0)",
      )
      .run().lastInsertRowid;
    const entries = sampleEntries();
    const insert = old.prepare(
      'INSERT INTO file_index (source_id, path, kind, size, mtime_ns, ino, mode, target, cid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    old.transaction(() => {
      for (const e of entries)
        insert.run(
          sourceId,
          e.path,
          e.kind,
          e.size,
          `${e.mtimeNs}`,
          `${e.ino}`,
          e.mode,
          e.target,
          e.cid,
        );
    })();
    old.close();

    const db = openStateDatabase(file);
    try {
      const index = sourceFileIndex(db, 'bucket', '/src');
      // Its files have no leaves, and it says so: a backup then finds them in the tree. Its
      // folders have no node size, so a backup walks them rather than reusing them.
      expect(index.leavesRecorded).toBe(false);
      for (const expected of entries)
        expect(index.lookup(expected.path)).toEqual({
          ...expected,
          nodeSize: null,
          leaves: null,
          ctimeNs: null,
        });
      // With no ctime recorded, a file is read once more, whatever its ctime now.
      const file = entries.find((entry) => entry.kind === 'file');
      const found = { size: file?.size ?? 0, mtimeNs: file?.mtimeNs ?? 0n, ino: file?.ino ?? 0n };
      expect(indexVouchesFor({ ...found, ctimeNs: 0n }, index.lookup(file?.path ?? ''))).toBe(
        false,
      );
    } finally {
      db.close();
    }
  });
});
