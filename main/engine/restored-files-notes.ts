import path from 'node:path';
import { sourcePlace } from '../protocol/index.ts';
import type { RestoredFileOnDisk } from '../restore/index.ts';
import { computerName, RestoredFiles, type RestoredFile, type StateDb } from '../state/index.ts';
import { isDiskFull } from '../api/index.ts';

// Notes the files a restore writes into the folder its bucket backs up from, on this computer,
// for the next backup of that folder to take their leaves instead of reading them again
// (state/restored-files.ts): a restore of a lost folder, or of a whole disk onto a new one,
// followed by a backup, read back everything it had just written. A whole version restored
// anywhere else is noted as well, by the folder it went to: a new computer's first backup goes
// on from the version it restored (`--replace-source`, its name or folder being another). Only
// the last such folder of a bucket keeps its notes, so that restores to look at old files do
// not pile them up.

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
   * Notes for a restore of bucket `bucketId`'s version labelled `sourceLabel` into `targetDir`,
   * the whole version (`whole`) or a part; undefined for a part restored outside the version's
   * source folder on this computer.
   */
  static forRestore(
    db: StateDb,
    bucketId: string,
    sourceLabel: unknown,
    targetDir: string,
    whole: boolean,
  ): RestoredFilesNotes | undefined {
    const source = sourcePlace(sourceLabel);
    const sourceHere = source?.host === computerName(db) ? source.folder : undefined;
    if (sourceHere !== undefined && isInside(targetDir, sourceHere))
      return new RestoredFilesNotes(RestoredFiles.of(db, bucketId, sourceHere), sourceHere);
    if (!whole) return undefined;
    const notes = new RestoredFilesNotes(RestoredFiles.of(db, bucketId, targetDir), targetDir);
    notes.writing(() => notes.files.forgetOtherTargets(sourceHere));
    return notes;
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
    if (notes.length > 0) this.writing(() => this.files.record(notes));
  }

  /** Runs `write` unless notes failed already; a failure that spares the restore stops them. */
  private writing(write: () => void): void {
    if (this.notNotedBecause !== undefined) return;
    try {
      write();
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
