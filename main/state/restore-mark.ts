import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { takeFileLock } from './file-lock.ts';

// A mark in the Canopy home that a restore is under way: its token (in its temporary names)
// and its target folder. A restore writes each file to a temporary name beside its target and
// renames it once whole; one killed part-way leaves those temporaries behind. Its mark stays
// too, so a later restore knows where to look and which names are its to remove, and which
// read-only folders of the user's it had opened to write into, whose modes it gives back, and
// which large files it was writing, which the next restore into the same place goes on with.
//
// A mark is held as BackupLock is, by a file lock (takeFileLock): the kernel drops the lock
// with its process, so a mark that can be taken belongs to a restore
// that stopped, and one that cannot belongs to a restore still running (in this process or
// another), whose temporaries must stay. The lock file is made under a name no one looks at
// and renamed into place once locked, so no one can take a mark between its making and its
// locking.

// A kill in the moment between writing a mark's target file and renaming its lock file into
// place leaves the target file, and maybe the lock under its `.new` name: before anything was
// restored, so there are no temporaries to look for. (So does a kill between removing an ended
// mark's lock file and its target file.) They go once they are an hour old and no one holds
// them; a younger one may be a mark being made right now.

const MARK_NAME = /^restore-([0-9a-f]{8})\.lock$/;
/** The files a mark is made of, under their names while it is made. */
const PART_NAME = /^restore-([0-9a-f]{8})\.(json|lock\.new)$/;
/** How old a part of a mark that was never made whole must be before it is removed. */
const UNMADE_MARK_AGE_MS = 60 * 60 * 1000;

export class RestoreMark {
  private released = false;

  private constructor(
    private readonly dir: string,
    private readonly db: Database.Database,
    /** In the restore's temporary names; unique among the restores this home has marked. */
    readonly token: string,
  ) {}

  /** Marks a restore into `target` as under way, until `end`. */
  static start(home: string, target: string): RestoreMark {
    const dir = path.join(home, 'locks');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const token = randomBytes(4).toString('hex');
    const stem = path.join(dir, `restore-${token}`);
    writeFileSync(`${stem}.json`, JSON.stringify({ target }), { mode: 0o600 });
    let db: Database.Database | null = null;
    try {
      // Nobody else knows a `.new` name, so no one else can hold it.
      db = takeFileLock(`${stem}.lock.new`);
      if (!db) throw new Error(`the new restore mark ${stem}.lock.new is locked already`);
      renameSync(`${stem}.lock.new`, `${stem}.lock`);
    } catch (error) {
      db?.close();
      rmSync(`${stem}.lock.new`, { force: true });
      rmSync(`${stem}.json`, { force: true });
      throw error;
    }
    return new RestoreMark(dir, db, token);
  }

  /**
   * The marks of restores that stopped without ending, each with its target, now held here:
   * `end` each once its temporaries are gone. Marks of restores still running are left.
   */
  static stopped(home: string): Array<{ mark: RestoreMark; target: string }> {
    const dir = path.join(home, 'locks');
    const names = namesIn(dir);
    const stopped: Array<{ mark: RestoreMark; target: string }> = [];
    const made = new Set<string>();
    for (const name of names) {
      const token = MARK_NAME.exec(name)?.[1];
      if (token === undefined) continue;
      made.add(token);
      const found = RestoreMark.takeStopped(dir, token);
      if (found === 'unmarked') continue;
      if (found) stopped.push(found);
    }
    const unmade = new Set<string>();
    for (const name of names) {
      const token = PART_NAME.exec(name)?.[1];
      if (token !== undefined && !made.has(token)) unmade.add(token);
    }
    const present = new Set(names);
    for (const token of unmade) removeUnmadeMark(dir, token, present);
    return stopped;
  }

  /**
   * The targets of the restores running now, in this process or another: those whose marks
   * are held. A mark that cannot be read now is left out.
   */
  static runningTargets(home: string): string[] {
    const dir = path.join(home, 'locks');
    const names = namesIn(dir);
    const targets: string[] = [];
    for (const name of names) {
      const token = MARK_NAME.exec(name)?.[1];
      if (token === undefined) continue;
      try {
        const db = takeFileLock(path.join(dir, name), { mustExist: true });
        // Taken: its restore stopped, which `stopped` tidies after; let go of at once.
        if (db) {
          db.close();
          continue;
        }
        const target = targetOf(path.join(dir, `restore-${token}.json`));
        if (target !== undefined) targets.push(target);
      } catch {
        // Gone meanwhile (its restore ended), or out of reach: not one to tell.
      }
    }
    return targets;
  }

  /**
   * The mark of `token`, held here, with its target, if its restore stopped; undefined when it
   * stopped with no target to look in (the mark is gone then); 'unmarked' when it is left:
   * its restore is still running (it holds the mark), or the mark cannot be read now (its
   * files' permissions were changed, say), and a later run looks at it again. A mark that cannot
   * be read does not stop the restore that found it.
   */
  private static takeStopped(
    dir: string,
    token: string,
  ): { mark: RestoreMark; target: string } | undefined | 'unmarked' {
    let db: Database.Database | null;
    try {
      db = takeFileLock(path.join(dir, `restore-${token}.lock`));
    } catch {
      return 'unmarked';
    }
    if (!db) return 'unmarked';
    const mark = new RestoreMark(dir, db, token);
    let target: string | undefined;
    try {
      target = targetOf(path.join(dir, `restore-${token}.json`));
    } catch {
      mark.release();
      return 'unmarked';
    }
    if (target !== undefined) return { mark, target };
    mark.end();
    return undefined;
  }

  /**
   * Notes a folder the restore is about to open to write into, with the mode to give back:
   * before it is opened, so a kill at any point leaves it noted. One line each, appended.
   */
  noteOpenedFolder(folder: { readonly dir: string; readonly mode: number }): void {
    appendFileSync(
      path.join(this.dir, `restore-${this.token}.opened`),
      `${JSON.stringify({ dir: folder.dir, mode: folder.mode })}\n`,
      { mode: 0o600 },
    );
  }

  /** The folders noted by noteOpenedFolder, with their modes. */
  openedFolders(): Array<{ dir: string; mode: number }> {
    let text: string;
    try {
      text = readFileSync(path.join(this.dir, `restore-${this.token}.opened`), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const folders: Array<{ dir: string; mode: number }> = [];
    for (const line of text.split('\n')) {
      const folder = openedFolderOf(line);
      if (folder) folders.push(folder);
    }
    return folders;
  }

  /**
   * Notes a large file the restore is about to write (or to go on writing) under `temporary`,
   * bound for `place` (where it goes when nothing has that name): before its temporary is made,
   * so a kill at any point leaves it noted. A restore stopped part-way keeps such a file for the
   * next restore into the same place to go on with (part-files.ts). One line each, appended.
   */
  notePartFile(part: PartFile): void {
    appendFileSync(
      path.join(this.dir, `restore-${this.token}.parts`),
      `${JSON.stringify({ temporary: part.temporary, place: part.place })}\n`,
      { mode: 0o600 },
    );
  }

  /**
   * The files noted by notePartFile, each once, and when the last was noted (ms since the epoch);
   * none when no file was noted.
   */
  partFiles(): { readonly files: PartFile[]; readonly notedAt: number } {
    const file = path.join(this.dir, `restore-${this.token}.parts`);
    let text: string;
    let notedAt: number;
    try {
      notedAt = statSync(file).mtimeMs;
      text = readFileSync(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { files: [], notedAt: 0 };
      throw error;
    }
    const byTemporary = new Map<string, PartFile>();
    for (const line of text.split('\n')) {
      const part = partFileOf(line);
      if (part) byTemporary.set(part.temporary, part);
    }
    return { files: [...byTemporary.values()], notedAt };
  }

  /** The restore ended, whole or not, and left nothing under temporary names: the mark goes. */
  end(): void {
    if (this.released) return;
    // Let go of first: Windows removes no file that is open. Another run that takes the mark
    // in between finds nothing left under its temporary names, and removes it as well.
    this.release();
    const stem = path.join(this.dir, `restore-${this.token}`);
    // First: once the lock is gone, nothing would remove it.
    rmSync(`${stem}.opened`, { force: true });
    rmSync(`${stem}.parts`, { force: true });
    rmSync(`${stem}.lock`, { force: true });
    rmSync(`${stem}.json`, { force: true });
  }

  /** Lets go of the mark and keeps it, for a later run to take again. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.db.close();
  }
}

/** The names in the home's folder of locks; none before it is made. */
function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/**
 * Removes the parts of the mark of `token` that was never made whole, once they are old and no
 * one holds its lock file. Any failure leaves them for a later run: a few bytes must not stop
 * the restore that found them.
 */
function removeUnmadeMark(dir: string, token: string, names: ReadonlySet<string>): void {
  const parts = [`restore-${token}.lock.new`, `restore-${token}.json`]
    .filter((name) => names.has(name))
    .map((name) => path.join(dir, name));
  try {
    if (parts.some((part) => Date.now() - statSync(part).mtimeMs < UNMADE_MARK_AGE_MS)) return;
    const lockFile = parts.find((part) => part.endsWith('.lock.new'));
    const db = lockFile === undefined ? undefined : takeFileLock(lockFile);
    // Held: a restore is making this mark right now (or is stopped while it does).
    if (db === null) return;
    db?.close();
    for (const part of parts) rmSync(part, { force: true });
  } catch {
    // Gone meanwhile (another run removed them), or out of reach now: looked at again next time.
  }
}

/** The fields of a line of JSON a mark appended; none for one cut short by a kill, or empty. */
function fieldsOf(line: string): Readonly<Record<string, unknown>> {
  try {
    const parsed: unknown = JSON.parse(line);
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * A folder and its mode as noteOpenedFolder wrote them; undefined for a line cut short by a kill
 * (the last), or the empty one after the last.
 */
function openedFolderOf(line: string): { dir: string; mode: number } | undefined {
  const { dir, mode } = fieldsOf(line);
  if (typeof dir !== 'string' || !path.isAbsolute(dir)) return undefined;
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o7777)
    return undefined;
  return { dir, mode };
}

/** A file part-written by a restore, and the place it is bound for (notePartFile). */
export interface PartFile {
  /** Its temporary name: an absolute path. */
  readonly temporary: string;
  /** Where it goes when nothing has that name: an absolute path. */
  readonly place: string;
}

/** A part file as notePartFile wrote it; undefined for a line cut short by a kill. */
function partFileOf(line: string): PartFile | undefined {
  const { temporary, place } = fieldsOf(line);
  if (typeof temporary !== 'string' || !path.isAbsolute(temporary)) return undefined;
  if (typeof place !== 'string' || !path.isAbsolute(place)) return undefined;
  return { temporary, place };
}

/** The target a mark names; undefined when its file is gone or was cut short by a kill. */
function targetOf(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    const target = (parsed as { target?: unknown }).target;
    return typeof target === 'string' && path.isAbsolute(target) ? target : undefined;
  } catch {
    // A kill while the mark was written, before its restore began: nothing to look for.
    return undefined;
  }
}
