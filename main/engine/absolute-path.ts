import path from 'node:path';
import { EngineError } from '../api/index.ts';

/** The folder this process runs in; undefined when it was deleted under it (ENOENT). */
export function currentWorkingFolder(): string | undefined {
  try {
    return process.cwd();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return undefined;
  }
}

/** absolutePathFrom `given`, from the folder this process runs in. */
export function absolutePath(given: string): string {
  return absolutePathFrom(given, currentWorkingFolder());
}

/**
 * `given` (a folder to back up, a restore's target, a data folder) as an absolute path: a
 * relative one goes from `workingFolder`, the folder the command was typed in. When that folder
 * was deleted under the shell (undefined), there is nowhere it goes from, and the user is told
 * so (`usage`) rather than shown the operating system's `uv_cwd` failure.
 */
export function absolutePathFrom(given: string, workingFolder: string | undefined): string {
  if (path.isAbsolute(given)) return path.resolve(given);
  if (workingFolder === undefined)
    throw new EngineError(
      'usage',
      `${given} goes from the folder this command was typed in, which was deleted: give its full path, or run the command in a folder that exists`,
    );
  return path.resolve(workingFolder, given);
}
