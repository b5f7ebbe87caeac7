import { createHash, type Hash } from 'node:crypto';
import { closeSync, readSync, type Stats } from 'node:fs';
import { type FileHandle, readlink } from 'node:fs/promises';
import path from 'node:path';
import type { CID } from 'multiformats/cid';
import { SHA2_256_CODE, sha256Of } from '../protocol/index.ts';
import { openSourceFile, openSourceHandle } from '../scanner/index.ts';
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
// A file or link kept in the way gets the version's beside it, as "a (restored).txt"; such a
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

/**
 * Files up to this size are compared on the engine's thread, not through the thread pool: an
 * open, a read and a close of a few kilobytes cost less than their hand-offs, and the name is
 * not looked up again when the caller looked at it already. A dry run of a restore into a folder
 * holding its 100 000 small files already took 7.1-7.6 s this way (a leaf read whole hashed in
 * one call), against 16.5-17.6 s through the pool.
 */
const SYNC_COMPARE_UP_TO = 64 * 1024;

/** A file's bytes hashed as they are read, leaf by leaf, against the leaves a version lists. */
class LeafMatcher {
  private readonly leaves: Iterator<CID>;
  /** The leaf being read: its bytes left, and their hash once they come in parts. */
  private leaf: { readonly cid: CID; left: number; hash?: Hash } | undefined;
  /** Where the next read starts. */
  position = 0;
  private differs = false;

  constructor(private readonly wanted: VersionFile) {
    this.leaves = wanted.leaves()[Symbol.iterator]();
    this.nextLeaf();
  }

  /** How many bytes to read next, at most `most`: 0 once all are read or some differ. */
  toRead(most: number): number {
    return this.differs || !this.leaf ? 0 : Math.min(this.leaf.left, most);
  }

  /** Takes the bytes read at `position`: none, the file ended early. */
  took(bytes: Uint8Array): void {
    const leaf = this.leaf;
    // Shorter than it was a moment ago: it is being written to, so it is not the same.
    if (!leaf || bytes.length === 0) {
      this.differs = true;
      return;
    }
    this.position += bytes.length;
    leaf.left -= bytes.length;
    // A leaf read in one piece, as a small file's is, is hashed in one call (sha256-of.ts).
    if (leaf.left === 0 && !leaf.hash) return this.endLeaf(leaf.cid, sha256Of(bytes));
    leaf.hash ??= createHash('sha256');
    leaf.hash.update(bytes);
    if (leaf.left === 0) this.endLeaf(leaf.cid, leaf.hash.digest());
  }

  /** Whether every leaf matched, and the file held no more. */
  get same(): boolean {
    return !this.differs && !this.leaf && this.position === this.wanted.size;
  }

  private endLeaf(cid: CID, digest: Buffer): void {
    if (!digest.equals(cid.multihash.digest)) this.differs = true;
    else this.nextLeaf();
  }

  private nextLeaf(): void {
    const next = this.leaves.next();
    this.leaf = undefined;
    if (next.done === true) return;
    const cid = next.value;
    const size = this.wanted.leafSize(cid);
    // Only SHA-256 leaves are made (§17); another could not be compared here.
    if (size === undefined || cid.multihash.code !== SHA2_256_CODE) {
      this.differs = true;
      return;
    }
    this.leaf = { cid, left: size };
    if (size === 0) this.endLeaf(cid, sha256Of(new Uint8Array()));
  }
}

/** Whether an error of opening a file to compare it says only that it cannot be compared. */
function isUncomparable(error: unknown): boolean {
  // One this user may not read, or gone since: it cannot be told the same, so it is kept
  // and the version's file is restored beside it, as for any other file in the way.
  return UNCOMPARABLE_CODES.has((error as NodeJS.ErrnoException).code ?? '');
}

/** holdsSameBytes for a small file, read on this thread. */
function holdsSameBytesNow(file: string, wanted: VersionFile): boolean {
  let fd: number;
  try {
    fd = openSourceFile(file);
  } catch (error) {
    if (isUncomparable(error)) return false;
    throw error;
  }
  try {
    const matcher = new LeafMatcher(wanted);
    const buffer = Buffer.allocUnsafe(Math.max(1, wanted.size));
    for (
      let length = matcher.toRead(buffer.length);
      length > 0;
      length = matcher.toRead(buffer.length)
    )
      matcher.took(buffer.subarray(0, readSync(fd, buffer, 0, length, matcher.position)));
    return matcher.same;
  } finally {
    closeSync(fd);
  }
}

/**
 * Whether `file` is a regular file holding exactly the bytes of `wanted`; `stats`, its lstat,
 * when the caller has it already.
 */
export async function holdsSameBytes(
  file: string,
  wanted: VersionFile,
  stats: Stats | undefined = lstatUnlessRefused(file),
): Promise<boolean> {
  if (!stats?.isFile() || stats.size !== wanted.size) return false;
  if (wanted.size <= SYNC_COMPARE_UP_TO) return holdsSameBytesNow(file, wanted);
  let handle: FileHandle;
  try {
    handle = await openSourceHandle(file);
  } catch (error) {
    if (isUncomparable(error)) return false;
    throw error;
  }
  try {
    const matcher = new LeafMatcher(wanted);
    // Read READ_BYTES at a time, whatever the leaves' size.
    const buffer = Buffer.allocUnsafe(Math.min(READ_BYTES, wanted.size));
    for (
      let length = matcher.toRead(buffer.length);
      length > 0;
      length = matcher.toRead(buffer.length)
    ) {
      const { bytesRead } = await handle.read(buffer, 0, length, matcher.position);
      matcher.took(buffer.subarray(0, bytesRead));
    }
    return matcher.same;
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
  for (const copy of restoredCopiesOf(place, 'file or link')) if (await holdsIt(copy)) return copy;
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
        : holdsSameBytes(file, fileOf(entry), file === place ? existing : undefined),
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
