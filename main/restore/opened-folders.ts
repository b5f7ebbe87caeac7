import { accessSync, chmodSync, constants, statSync, type Stats } from 'node:fs';

// Folders of the user's own that a restore writes into although they are read-only: a tree
// kept with `chmod -R a-w`, or Go's module cache, restored to where it came from. The owner may
// always change a folder's mode, so refusing would only make them do by hand what the restore
// can: the folder is given its owner's write permission for the while, and its own mode back
// once the restore is done, whether it succeeded or not. Root writes anywhere, so for root
// nothing is opened. A folder of another user's is left as it is, and the write into it fails
// with its own error.

function codeOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Whether this process's user owns what `stats` describes, and so may change its mode. */
export function ownedByThisUser(stats: Stats): boolean {
  return process.getuid !== undefined && stats.uid === process.getuid();
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
    if (codeOf(error) !== 'EACCES') return false;
  }
  const stats = statSync(dir);
  return stats.isDirectory() && ownedByThisUser(stats);
}

export class OpenedFolders {
  /** The mode of each folder opened, to give back; folders found open map to undefined. */
  readonly #modes = new Map<string, number | undefined>();

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
    chmodSync(dir, mode | 0o300);
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
        if (codeOf(error) !== 'ENOENT') failures.push(error as Error);
      }
    }
    this.#modes.clear();
    return failures;
  }
}
