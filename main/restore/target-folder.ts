import { lstatSync, readlinkSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { EngineError } from '../api/index.ts';
import { lstatUnlessRefused } from './refused-entry.ts';

// A restore writes into a folder: the one named, made when it is not there, or the one a
// symbolic link of that name leads to (as cp and rsync write through one). What else may be at
// that path is told in the same words by the restore, which finds it when it cannot make the
// folder, and by its dry run, which only looks.

function notAFolder(targetDir: string): string {
  return `${targetDir} is not a folder; a restore writes into a folder`;
}

function underAFile(targetDir: string, file: string): string {
  return `no folder can be made at ${targetDir}: ${file} is a file`;
}

function linkToNothing(targetDir: string, link: string): string {
  return `no folder can be made at ${targetDir}: it is a symbolic link to ${link}, which is not there`;
}

/** The file in place of a folder above `dir` (its path has a file in it), if there is one. */
function fileAbove(dir: string): string | undefined {
  const parent = path.dirname(dir);
  if (parent === dir) return undefined;
  let stats;
  try {
    stats = lstatSync(parent, { throwIfNoEntry: false });
  } catch (error) {
    // A file higher up still.
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return fileAbove(parent);
    throw error;
  }
  if (stats?.isDirectory() === true) return undefined;
  return stats ? parent : fileAbove(parent);
}

/** Where `file` points when it is a symbolic link; undefined when it is not one. */
function linkedTo(file: string): string | undefined {
  return lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink() === true
    ? readlinkSync(file)
    : undefined;
}

/** What is at a restore's target, looked at, a symbolic link followed. */
export interface TargetLook {
  /** What is there, through a link; undefined when nothing is, and so a folder is made. */
  readonly stats: Stats | undefined;
  /** Why no restore can write there; undefined when it may (if this user may write there). */
  readonly refusedBecause: string | undefined;
}

/** What is at `targetDir` for a restore into it, and why it cannot be one, without writing. */
export function lookAtTarget(targetDir: string): TargetLook {
  let target: Stats | undefined;
  try {
    target = lstatUnlessRefused(targetDir);
  } catch (error) {
    const file = (error as NodeJS.ErrnoException).code === 'ENOTDIR' && fileAbove(targetDir);
    if (!file) throw error;
    return { stats: undefined, refusedBecause: underAFile(targetDir, file) };
  }
  if (target?.isSymbolicLink() === true) {
    const linked = statSync(targetDir, { throwIfNoEntry: false });
    if (linked === undefined)
      return {
        stats: undefined,
        refusedBecause: linkToNothing(targetDir, readlinkSync(targetDir)),
      };
    target = linked;
  }
  return {
    stats: target,
    refusedBecause: target && !target.isDirectory() ? notAFolder(targetDir) : undefined,
  };
}

/**
 * Why the folder a restore writes into could not be made at `targetDir`, from the error making
 * it gave: something else is there, or a file above it, or a link to nothing; undefined for
 * any other error.
 */
export function targetFolderError(error: unknown, targetDir: string): EngineError | undefined {
  const { code } = error as NodeJS.ErrnoException;
  if (code === 'EEXIST' || code === 'ENOTDIR') {
    const file = fileAbove(targetDir);
    return new EngineError(
      'usage',
      file === undefined ? notAFolder(targetDir) : underAFile(targetDir, file),
      { cause: error },
    );
  }
  // Its parent is there, yet it cannot be made: a symbolic link to nothing, or a pseudo file
  // system such as /proc.
  if (code === 'ENOENT') {
    const link = linkedTo(targetDir);
    return new EngineError(
      'usage',
      link === undefined ? `no folder can be made at ${targetDir}` : linkToNothing(targetDir, link),
      { cause: error },
    );
  }
  return undefined;
}
