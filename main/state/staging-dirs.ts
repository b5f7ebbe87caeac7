import { randomUUID } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';

// Staging folders are named after the process that made them, so a run can tell the leftovers
// of a killed run (its process is gone, and no queued upload uses them) from another run's
// work in progress, and remove only those. Here, in the state, rather than with the uploader
// that fills them: the engine clears them when it starts, with no upload to make.

// A metadata CAR's file is named as a folder is, and the index of its nodes after it.
const NAME = /^(\d+)-[0-9a-f-]{36}(?:\.nodes)?$/;

/**
 * The index of the nodes of the metadata CAR `carFile` (main/uploader/tree-node-index.ts), kept
 * beside it, staged or cached.
 */
export function nodeIndexFileOf(carFile: string): string {
  return `${carFile}.nodes`;
}

export function newStagingDir(stagingRoot: string): string {
  return path.join(stagingRoot, `${process.pid}-${randomUUID()}`);
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes staging folders (and files) of dead processes that no queued upload still needs. */
export async function removeAbandonedStaging(
  stagingRoot: string,
  queued: ReadonlySet<string>,
): Promise<void> {
  let names: string[];
  try {
    names = await readdir(stagingRoot);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  for (const name of names) {
    const dir = path.join(stagingRoot, name);
    const pid = NAME.exec(name)?.[1];
    // A queued metadata CAR keeps the index of its nodes beside it.
    const kept = queued.has(dir) || queued.has(dir.replace(/\.nodes$/, ''));
    if (pid === undefined || kept || processAlive(Number(pid))) continue;
    await rm(dir, { recursive: true, force: true });
  }
}
