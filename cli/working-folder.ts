import { absolutePathFrom, currentWorkingFolder } from '../main/engine/absolute-path.ts';

// The folder the command was typed in, read once as it starts. When it was deleted under the
// shell, the process moves to `/`: on Node 20 no worker thread can start in a deleted working
// folder (each fails with ENOENT for uv_cwd), and backups and restores read, hash and write
// files on worker threads. Relative path words are then refused (absolutePathFrom), never taken
// from `/`. bin/canopy.js moves there before it loads anything, and marks that it did.

const typedIn =
  Symbol.for('canopy.typedInDeletedFolder') in globalThis ? undefined : currentWorkingFolder();

/** The folder the command was typed in; undefined when it had been deleted. */
export function typedInFolder(): string | undefined {
  return typedIn;
}

/** A folder word (backup's DIR, --to, --data) as an absolute path, from where it was typed. */
export function folderWord(word: string): string {
  return absolutePathFrom(word, typedIn);
}
