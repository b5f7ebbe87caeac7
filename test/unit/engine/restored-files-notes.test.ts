import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RestoredFilesNotes } from '../../../main/engine/restored-files-notes.ts';
import { openStateDatabase, RestoredFiles } from '../../../main/state/index.ts';

// What a restore notes for the next backup: only files it wrote into the folder the bucket
// backs up from on this computer, each by its path below that folder; and a full disk under
// Canopy's state, or another process holding it, leaves them unnoted (they are read again),
// without failing the restore.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restored-notes-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const source = '/home/ann/Documents';
const label = `${os.hostname()}:${source}`;
const asLeft = {
  size: 5,
  mtimeNs: 1_700_000_000_123_456_000n,
  ctimeNs: 1_800_000_000_987_654_321n,
  ino: 42n,
  leaves: new Uint8Array(32),
};

function database(name: string) {
  return openStateDatabase(path.join(scratch, `${name}.sqlite`));
}

describe('RestoredFilesNotes', () => {
  it('notes files restored into the source folder by their path below it', () => {
    const db = database('inside');
    try {
      const notes = RestoredFilesNotes.forRestore(db, 'bucket-1', label, `${source}/photos`, false);
      expect(notes).toBeDefined();
      notes?.add({ file: `${source}/photos/cat.jpg`, ...asLeft });
      expect(notes?.finish()).toBeNull();
      const restored = RestoredFiles.of(db, 'bucket-1', source);
      expect(restored.unchangedAt('photos/cat.jpg', asLeft)).toMatchObject({ size: 5 });
      // Any write since shows in its mtime, or in its ctime where the mtime was set back, and a
      // file put in its place has another inode.
      expect(restored.unchangedAt('photos/cat.jpg', { ...asLeft, mtimeNs: 1n })).toBeUndefined();
      expect(restored.unchangedAt('photos/cat.jpg', { ...asLeft, ctimeNs: 1n })).toBeUndefined();
      expect(restored.unchangedAt('photos/cat.jpg', { ...asLeft, ino: 43n })).toBeUndefined();
      expect(restored.unchangedAt('photos/cat.jpg', { ...asLeft, size: 6 })).toBeUndefined();
      // Another bucket backing up the same folder knows nothing of it.
      expect(RestoredFiles.of(db, 'bucket-2', source).newest()).toBe(0);
    } finally {
      db.close();
    }
  });

  it('notes nothing for a part restored elsewhere, or of a version from another computer', () => {
    const db = database('elsewhere');
    try {
      for (const target of ['/tmp/back', '/home/ann', '/home/ann/Documents-old', '/'])
        expect(RestoredFilesNotes.forRestore(db, 'b', label, target, false)).toBeUndefined();
      expect(
        RestoredFilesNotes.forRestore(db, 'b', `not-${os.hostname()}:${source}`, source, false),
      ).toBeUndefined();
      expect(RestoredFilesNotes.forRestore(db, 'b', undefined, source, false)).toBeUndefined();
      // A folder whose name begins with two dots is still inside.
      expect(
        RestoredFilesNotes.forRestore(db, 'b', label, `${source}/..hidden`, false),
      ).toBeDefined();
    } finally {
      db.close();
    }
  });

  it('notes a whole version restored elsewhere by that folder, keeping only the last such', () => {
    const db = database('whole');
    try {
      const restoreTo = (target: string, file: string): void => {
        const notes = RestoredFilesNotes.forRestore(db, 'b', label, target, true);
        notes?.add({ file: path.join(target, file), ...asLeft });
        expect(notes?.finish()).toBeNull();
      };
      // Into the source folder: kept whatever is restored after.
      restoreTo(source, 'kept.txt');
      // Into a folder the bucket was once backed up from here (its file index is kept): kept.
      db.prepare(
        "INSERT INTO file_index_sources (bucket_id, source_dir, version_id, entry_count) VALUES ('b', '/srv/old', 'v', 0)",
      ).run();
      restoreTo('/srv/old', 'old.txt');
      // A new computer's folder, or a look at old files.
      restoreTo('/home/ann/Restored', 'a.txt');
      expect(
        RestoredFiles.of(db, 'b', '/home/ann/Restored').unchangedAt('a.txt', asLeft),
      ).toBeDefined();
      restoreTo('/tmp/look', 'b.txt');
      expect(RestoredFiles.of(db, 'b', '/home/ann/Restored').newest()).toBe(0);
      expect(RestoredFiles.of(db, 'b', '/tmp/look').unchangedAt('b.txt', asLeft)).toBeDefined();
      expect(RestoredFiles.of(db, 'b', source).unchangedAt('kept.txt', asLeft)).toBeDefined();
      expect(RestoredFiles.of(db, 'b', '/srv/old').unchangedAt('old.txt', asLeft)).toBeDefined();
    } finally {
      db.close();
    }
  });

  it('keeps a record a restore made after a backup began, when that backup clears its own', () => {
    const db = database('clear');
    try {
      const restored = RestoredFiles.of(db, 'b', source);
      restored.record([{ path: 'a', ...asLeft }]);
      const backupBegan = restored.newest();
      // Restored again while the backup ran: a new record, which the next backup needs.
      restored.record([{ path: 'a', ...asLeft, ino: 50n }]);
      restored.clearThrough(backupBegan);
      expect(restored.unchangedAt('a', { ...asLeft, ino: 50n })).toBeDefined();
      restored.clearThrough(restored.newest());
      expect(restored.newest()).toBe(0);
    } finally {
      db.close();
    }
  });

  it('leaves the files unnoted, and says so, while another process holds the state', () => {
    const file = path.join(scratch, 'busy.sqlite');
    const db = openStateDatabase(file);
    const other = openStateDatabase(file);
    try {
      // Waits a tenth of a second here rather than the engine's 30 s.
      db.pragma('busy_timeout = 100');
      other.exec('BEGIN IMMEDIATE');
      const notes = RestoredFilesNotes.forRestore(db, 'b', label, source, false);
      notes?.add({ file: `${source}/a`, ...asLeft });
      expect(notes?.finish()).toBe("another Canopy process kept Canopy's state busy");
      other.exec('ROLLBACK');
      expect(RestoredFiles.of(db, 'b', source).newest()).toBe(0);
    } finally {
      other.close();
      db.close();
    }
  });

  it('leaves the files unnoted, and says so, when the disk of the state is full', () => {
    const db = database('full');
    try {
      const notes = RestoredFilesNotes.forRestore(db, 'b', label, source, false);
      // SQLite's own "database or disk is full" (SQLITE_FULL), as on a disk with no room left.
      const pages = db.pragma('page_count', { simple: true }) as number;
      db.pragma(`max_page_count = ${pages}`);
      for (let index = 0; index < 1500; index++)
        notes?.add({ file: `${source}/file-${index}`, ...asLeft });
      expect(notes?.finish()).toBe("the disk holding Canopy's state is full");
      expect(RestoredFiles.of(db, 'b', source).newest()).toBe(0);
    } finally {
      db.close();
    }
  });
});
