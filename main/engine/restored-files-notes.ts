import os from 'node:os';
import path from 'node:path';
import { sourcePlace } from '../protocol/index.ts';
import type { RestoredFileOnDisk } from '../restore/index.ts';
import { RestoredFiles, type RestoredFile, type StateDb } from '../state/index.ts';
import { isDiskFull } from '../api/index.ts';

// Notes the files a restore writes into the folder its bucket backs up from, on this computer,
// for the next backup of that folder to take their leaves instead of reading them again
// (state/restored-files.ts): a restore of a lost folder, or of a whole disk onto a new one,
// followed by a backup, read back everything it had just written.

/** Notes written at once, in one transaction. */
const NOTES_PER_WRITE = 1000;

export class RestoredFilesNotes {
  private waiting: RestoredFile[] = [];
  /** Why some files could not be noted; undefined while all were. */
  private notNotedBecause: string | undefined;

  private constructor(
    private readonly files: RestoredFiles,
    private readonly sourceDir: string,
  ) {}

  /**
   * Notes for a restore of bucket `bucketId`'s version labelled `sourceLabel` into `targetDir`;
   * undefined unless that folder lies in the version's source folder on this computer.
   */
  static forRestore(
    db: StateDb,
    bucketId: string,
    sourceLabel: unknown,
    targetDir: string,
  ): RestoredFilesNotes | undefined {
    const source = sourcePlace(sourceLabel);
    if (!source || source.host !== os.hostname() || !isInside(targetDir, source.folder))
      return undefined;
    return new RestoredFilesNotes(RestoredFiles.of(db, bucketId, source.folder), source.folder);
  }

  /** Notes `file`, restored whole under its name. */
  add(file: RestoredFileOnDisk): void {
    if (this.notNotedBecause !== undefined) return;
    const { file: where, ...asLeft } = file;
    this.waiting.push({ path: path.relative(this.sourceDir, where), ...asLeft });
    if (this.waiting.length >= NOTES_PER_WRITE) this.write();
  }

  /**
   * Writes the notes still waiting. Returns why some files could not be noted, so that the next
   * backup reads them again, or null when all were.
   */
  finish(): string | null {
    this.write();
    return this.notNotedBecause ?? null;
  }

  private write(): void {
    const notes = this.waiting;
    this.waiting = [];
    if (notes.length === 0 || this.notNotedBecause !== undefined) return;
    try {
      this.files.record(notes);
    } catch (error) {
      this.notNotedBecause = whyNotNoted(error);
    }
  }
}

/**
 * Why notes could not be written, for a failure that leaves the restore itself sound: a full
 * disk, or another Canopy process holding the state past the wait. Anything else (a damaged
 * database) is thrown, as every other use of the state would throw it.
 */
function whyNotNoted(error: unknown): string {
  if (isDiskFull(error)) return "the disk holding Canopy's state is full";
  if ((error as { code?: unknown } | null)?.code === 'SQLITE_BUSY')
    return "another Canopy process kept Canopy's state busy";
  throw error;
}

/** Whether `dir` is `folder` or lies in it, by their paths. */
function isInside(dir: string, folder: string): boolean {
  const relative = path.relative(folder, dir);
  return relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}
