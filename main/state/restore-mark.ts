import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { takeFileLock } from './file-lock.ts';

// A mark in the Canopy home that a restore is under way: its token (in its temporary names)
// and its target folder. A restore writes each file to a temporary name beside its target and
// renames it once whole; one killed part-way leaves those temporaries behind. Its mark stays
// too, so a later restore knows where to look and which names are its to remove.
//
// A mark is held as BackupLock is, by a file lock (takeFileLock): the kernel drops the lock
// with its process, so a mark that can be taken belongs to a restore
// that stopped, and one that cannot belongs to a restore still running (in this process or
// another), whose temporaries must stay. The lock file is made under a name no one looks at
// and renamed into place once locked, so no one can take a mark between its making and its
// locking.

// A kill in the moment between making a lock file and renaming it leaves it under its `.new`
// name, with its target file: a few bytes, before anything was restored, so they are left.

const MARK_NAME = /^restore-([0-9a-f]{8})\.lock$/;

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
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const stopped: Array<{ mark: RestoreMark; target: string }> = [];
    for (const name of names) {
      const token = MARK_NAME.exec(name)?.[1];
      if (token === undefined) continue;
      // Held by its restore, still running: left to it.
      const db = takeFileLock(path.join(dir, name));
      if (!db) continue;
      const mark = new RestoreMark(dir, db, token);
      const target = targetOf(path.join(dir, `restore-${token}.json`));
      if (target === undefined) mark.end();
      else stopped.push({ mark, target });
    }
    return stopped;
  }

  /** The restore ended, whole or not, and left nothing under temporary names: the mark goes. */
  end(): void {
    if (this.released) return;
    // Let go of first: Windows removes no file that is open. Another run that takes the mark
    // in between finds nothing left under its temporary names, and removes it as well.
    this.release();
    const stem = path.join(this.dir, `restore-${this.token}`);
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
