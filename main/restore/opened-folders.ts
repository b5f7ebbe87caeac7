import { accessSync, chmodSync, constants, lstatSync, statSync, type Stats } from 'node:fs';
import { isOutOfReach } from './left-temporaries.ts';
import { systemErrorCode } from '../api/index.ts';

// Folders of the user's own that a restore writes into although they are read-only: a tree
// kept with `chmod -R a-w`, or Go's module cache, restored to where it came from. The owner may
// always change a folder's mode, so refusing would only make them do by hand what the restore
// can: the folder is given its owner's write permission for the while, and its own mode back
// once the restore is done, whether it succeeded or not. Root writes anywhere, so for root
// nothing is opened. A folder of another user's is left as it is, and the write into it fails
// with its own error. A restore killed part-way (SIGKILL, a power cut) cannot give them back:
// each is noted in its mark before it is opened, and the next restore gives back the modes of
// those still as it left them.

/** Whether this process's user owns what `stats` describes, and so may change its mode. */
function ownedByThisUser(stats: Stats): boolean {
  return process.getuid !== undefined && stats.uid === process.getuid();
}

/**
 * Whether this process may change the mode and times of what `stats` describes: root, or its
 * owner. Where there are no POSIX owners (Windows), the change is tried and tells itself.
 */
export function mayChangeLook(stats: Stats): boolean {
  const uid = process.getuid?.();
  return uid === undefined || uid === 0 || stats.uid === uid;
}

/**
 * Whether `dir` is closed to writing only by its own mode, which its owner, this user, may
 * change: what a restore opens for the while.
 */
export function closedOnlyByItsMode(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return false;
  } catch (error) {
    // Anything else (a read-only disk, a folder gone) the write itself meets and reports.
    if (systemErrorCode(error) !== 'EACCES') return false;
  }
  const stats = statSync(dir);
  return stats.isDirectory() && ownedByThisUser(stats);
}

/** A folder a restore opened, with the mode it had. */
export interface OpenedFolder {
  readonly dir: string;
  readonly mode: number;
}

/** The mode a folder of `mode` has while a restore writes into it. */
function openedMode(mode: number): number {
  return mode | 0o300;
}

export class OpenedFolders {
  /** The mode of each folder opened, to give back; folders found open map to undefined. */
  readonly #modes = new Map<string, number | undefined>();

  /** `noteOpening` keeps each folder and its mode, before it is opened, where a crash leaves it. */
  constructor(private readonly noteOpening?: (folder: OpenedFolder) => void) {}

  /**
   * Lets this restore write into `dir` when it is this user's own folder, closed only by its
   * mode. Each folder is looked at once.
   */
  openIfClosed(dir: string): void {
    if (this.#modes.has(dir)) return;
    if (!closedOnlyByItsMode(dir)) {
      this.#modes.set(dir, undefined);
      return;
    }
    const mode = statSync(dir).mode & 0o7777;
    this.noteOpening?.({ dir, mode });
    chmodSync(dir, openedMode(mode));
    this.#modes.set(dir, mode);
  }

  /** `dir` is given its mode by the restore itself (its backed-up one): it is not given back. */
  modeGivenBy(dir: string): void {
    this.#modes.set(dir, undefined);
  }

  /**
   * Gives each folder opened its own mode back. Every one is tried; the failures are returned
   * (one gone meanwhile has nothing to give back and is not among them).
   */
  close(): Error[] {
    const failures: Error[] = [];
    for (const [dir, mode] of this.#modes) {
      if (mode === undefined) continue;
      try {
        chmodSync(dir, mode);
      } catch (error) {
        if (systemErrorCode(error) !== 'ENOENT') failures.push(error as Error);
      }
    }
    this.#modes.clear();
    return failures;
  }
}

/**
 * Gives back their modes the folders a restore killed part-way opened: those still as it left
 * them (one whose mode the user has changed since keeps theirs; one gone has none to give back).
 * False when one is out of reach now (its disk away, say), for a later run to try again.
 */
export function giveModesBack(folders: Iterable<OpenedFolder>): boolean {
  let allGiven = true;
  for (const { dir, mode } of folders) {
    try {
      const stats = lstatSync(dir);
      if (!stats.isDirectory() || !ownedByThisUser(stats)) continue;
      if ((stats.mode & 0o7777) === openedMode(mode)) chmodSync(dir, mode);
    } catch (error) {
      if (systemErrorCode(error) === 'ENOENT') continue;
      if (!isOutOfReach(error)) throw error;
      allGiven = false;
    }
  }
  return allGiven;
}
