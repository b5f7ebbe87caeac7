import { fstatSync, lstatSync } from 'node:fs';
import path from 'node:path';
import type { CID } from 'multiformats/cid';
import { isListableLeaf, LeafListBuilder } from '../packer/index.ts';
import type { InodeNumbers } from '../scanner/index.ts';

// A file as a restore left it, for the next backup of the folder it went to: its size, mtime,
// ctime and inode, which stay as they are while nothing writes to it, and the leaves the restore
// wrote into it. A backup finding the file still so takes those leaves instead of reading it
// again. Its ctime is the one after its rename to its name, which moves it.

/** A file written whole, before its rename: what it holds and how it was left. */
export interface FileAsWritten {
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ino: bigint;
  /** Its leaves as a leaf list (main/packer/leaf-list.ts). */
  readonly leaves: Uint8Array;
}

/** A restored file, whole under its name, as the restore left it. */
export interface RestoredFileOnDisk extends FileAsWritten {
  /** Its absolute path. */
  readonly file: string;
  readonly ctimeNs: bigint;
}

/**
 * The file open at `fd`, in `folder`, its content and times written, as it is left; undefined
 * when its leaves cannot make a leaf list (not raw sha2-256 chunks, as another tool may write
 * them), so that only a read of the file can say what it holds. Its inode number is as a
 * backup's walk finds it (`inodes`): 0 on a disk that makes them up.
 */
export function fileAsWritten(
  fd: number,
  folder: string,
  leaves: Iterable<CID>,
  inodes: InodeNumbers,
): FileAsWritten | undefined {
  const list = new LeafListBuilder();
  for (const leaf of leaves) {
    if (!isListableLeaf(leaf)) return undefined;
    list.add(leaf);
  }
  const stat = fstatSync(fd, { bigint: true });
  return {
    size: Number(stat.size),
    mtimeNs: stat.mtimeNs,
    ino: inodes.of(stat, folder),
    leaves: list.finish(),
  };
}

/**
 * The file `written` at `file` once renamed to it, with its ctime then; undefined when what is
 * there now is not that file as it was written (another write got in between).
 */
export function fileAsLeft(
  file: string,
  written: FileAsWritten,
  inodes: InodeNumbers,
): RestoredFileOnDisk | undefined {
  const stat = lstatSync(file, { bigint: true, throwIfNoEntry: false });
  if (
    !stat?.isFile() ||
    Number(stat.size) !== written.size ||
    stat.mtimeNs !== written.mtimeNs ||
    inodes.of(stat, path.dirname(file)) !== written.ino
  )
    return undefined;
  return { file, ...written, ctimeNs: stat.ctimeNs };
}
