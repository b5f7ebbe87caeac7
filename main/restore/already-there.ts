import { createHash } from 'node:crypto';
import { type FileHandle, readlink } from 'node:fs/promises';
import path from 'node:path';
import type { CID } from 'multiformats/cid';
import { SHA2_256_CODE } from '../protocol/index.ts';
import { openSourceHandle } from '../scanner/index.ts';
import { lstatUnlessRefused } from './refused-entry.ts';
import { FolderPlaces, restoredCopiesOf, restoredFolderCopy } from './restored-copies.ts';
import type { TreeEntry } from './walk-tree.ts';

// What a restore finds in its target already, byte for byte: the files of a restore that was
// stopped part way (a disk pulled out, the machine shut down) and run again, or the files of a
// restore into the original place that did not change since. Those are left as they are and
// not fetched again, instead of each getting a " (restored)" copy beside it.
//
// A file counts only when it is a regular file of the version's size and every piece of it
// hashes to the CID of the leaf it would be restored from: its name and size alone say nothing
// of its content. Its mode and mtime are the user's, and a file that was there keeps them, as
// it keeps its content when it differs. So does its access time: it is opened as a backup opens
// the files it reads (main/scanner/source-file.ts), which also never waits on a name that became
// a named pipe meanwhile.
//
// A file or link kept in the way gets the version's beside it, as "a.txt (restored)"; such a
// copy holding the version's bytes counts too, so that the same restore run again leaves no
// " (restored 2)" beside it (restored-copies.ts). So does what a folder restored beside a file
// of its name holds, in that folder's copy.

/**
 * Why a file that is there may not be opened to compare it: not this user's to read, gone
 * since, or no longer a regular file (a symbolic link, a pipe, a socket) since it was looked at.
 */
const UNCOMPARABLE_CODES = new Set(['EACCES', 'EPERM', 'ENOENT', 'ELOOP', 'ENXIO', 'ENOTREGULAR']);

/**
 * Files compared at once: each waits on its open, reads and close in the thread pool, and one
 * at a time, 11 000 files already there took longer to compare than to restore.
 */
const CHECKS_AT_ONCE = 8;

/** Bytes read from a file at once while comparing it. */
const READ_BYTES = 1024 * 1024;

/** A version's file, as much of it as the comparison needs. */
export interface VersionFile {
  /** Its size as its root states it. */
  readonly size: number;
  /** Its leaves in read order. */
  readonly leaves: () => Iterable<CID>;
  readonly leafSize: (cid: CID) => number | undefined;
}

/** Whether `file` is a regular file holding exactly the bytes of `wanted`. */
export async function holdsSameBytes(file: string, wanted: VersionFile): Promise<boolean> {
  const stats = lstatUnlessRefused(file);
  if (!stats?.isFile() || stats.size !== wanted.size) return false;
  let handle: FileHandle;
  try {
    handle = await openSourceHandle(file);
  } catch (error) {
    // One this user may not read, or gone since: it cannot be told the same, so it is kept
    // and the version's file is restored beside it, as for any other file in the way.
    if (UNCOMPARABLE_CODES.has((error as NodeJS.ErrnoException).code ?? '')) return false;
    throw error;
  }
  try {
    // Most files are small: a whole READ_BYTES each was garbage for nothing.
    const buffer = Buffer.allocUnsafe(Math.max(1, Math.min(READ_BYTES, wanted.size)));
    let position = 0;
    for (const leaf of wanted.leaves()) {
      const size = wanted.leafSize(leaf);
      // Only SHA-256 leaves are made (§17); another could not be compared here.
      if (size === undefined || leaf.multihash.code !== SHA2_256_CODE) return false;
      const hash = createHash('sha256');
      for (let left = size; left > 0;) {
        const { bytesRead } = await handle.read(buffer, 0, Math.min(left, buffer.length), position);
        // Shorter than it was a moment ago: it is being written to, so it is not the same.
        if (bytesRead === 0) return false;
        hash.update(buffer.subarray(0, bytesRead));
        position += bytesRead;
        left -= bytesRead;
      }
      if (!hash.digest().equals(leaf.multihash.digest)) return false;
    }
    return position === wanted.size;
  } finally {
    await handle.close();
  }
}

/** Whether `file` is a symbolic link to `target`. */
async function holdsSameLink(file: string, target: string): Promise<boolean> {
  if (!lstatUnlessRefused(file)?.isSymbolicLink()) return false;
  return (await readlink(file)) === target;
}

/**
 * Where the version's entry `place` is already held as the version has it: at `place`, or in a
 * restored copy beside what kept its name; undefined when nowhere.
 */
async function placeHolding(
  place: string,
  holdsIt: (file: string) => Promise<boolean>,
): Promise<string | undefined> {
  if (await holdsIt(place)) return place;
  for (const copy of restoredCopiesOf(place)) if (await holdsIt(copy)) return copy;
  return undefined;
}

/**
 * The files and links of `entries` that `targetDir` already holds as the version has them, by
 * their path below it. Each maps to undefined when held under its own name (in its folder, or in
 * that folder's restored copy), or to the path below the target of the restored copy of itself
 * that holds it, beside what kept its name. Folders missing from the target are not looked into.
 */
export async function entriesAlreadyThere(
  entries: Iterable<{ readonly entry: TreeEntry; readonly relative: string }>,
  targetDir: string,
  fileOf: (entry: TreeEntry) => VersionFile,
): Promise<Map<string, string | undefined>> {
  const there = new Map<string, string | undefined>();
  const folders = new FolderPlaces(targetDir);
  /** Folders of the version that the target lacks, or holds as something else. */
  const missing = new Set<string>();
  const checks = new Set<Promise<void>>();
  let failure: { readonly error: unknown } | undefined;
  for (const { entry, relative } of entries) {
    if (relative === '') continue;
    const parent = path.posix.dirname(relative);
    if (missing.has(parent === '.' ? '' : parent)) {
      if (entry.kind === 'directory') missing.add(relative);
      continue;
    }
    const place = folders.placeOf(relative);
    const existing = lstatUnlessRefused(place);
    if (entry.kind === 'directory') {
      const folder =
        existing?.isDirectory() === true ? place : existing && restoredFolderCopy(place);
      if (folder === undefined) missing.add(relative);
      else folders.set(relative, folder);
      continue;
    }
    if (!existing) continue;
    const held = placeHolding(place, (file) =>
      entry.kind === 'symlink'
        ? holdsSameLink(file, entry.target ?? '')
        : holdsSameBytes(file, fileOf(entry)),
    );
    const check: Promise<void> = held
      .then(
        (holder) => {
          if (holder !== undefined)
            there.set(relative, holder === place ? undefined : path.relative(targetDir, holder));
        },
        (error: unknown) => {
          failure ??= { error };
        },
      )
      .finally(() => checks.delete(check));
    checks.add(check);
    if (checks.size >= CHECKS_AT_ONCE) await Promise.race(checks);
    if (failure) break;
  }
  // None is left running when the first failure is reported.
  await Promise.all(checks);
  if (failure) throw failure.error;
  return there;
}
