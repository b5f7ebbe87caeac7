import { fchownSync, lchownSync, lstatSync } from 'node:fs';
import path from 'node:path';
import { systemErrorCode } from '../api/index.ts';

// A version keeps no owners (§17 stores modes and times only), so a restore run as root would
// make every file root's: an administrator restoring a user's lost folder into their home (`sudo
// canopy restore --to /home/ann/Documents`) would leave Ann files she cannot change. As root,
// each file, folder and link a restore makes takes instead the owner and group of the folder it
// is made in, as the folders it makes do in turn: into Ann's folder, Ann's; into root's, root's.
// What was there already keeps its own, and a file replaced (--overwrite) passes its on.

/** The errors of a disk that keeps no owners of its own (FAT and exFAT, some network shares). */
const OWNERS_NOT_KEPT = new Set(['EPERM', 'EOPNOTSUPP', 'ENOTSUP', 'ENOSYS', 'EINVAL']);

interface Owner {
  readonly uid: number;
  readonly gid: number;
}

/** A folder's owner, and the disk it is on. */
interface FolderOwner extends Owner {
  readonly dev: number;
}

export class InheritedOwners {
  /** The owners of the folders items were made in, by path, looked at once. */
  private readonly ownerOfFolder = new Map<string, FolderOwner>();
  /** Disks (by device) that refused an owner: no more is asked of them. */
  private readonly refusingDisks = new Set<number>();
  /** Items given an owner other than this process's. */
  given = 0;

  constructor(
    /** Whom this process makes items as: items owned so need no change. */
    private readonly self: Owner,
  ) {}

  /**
   * Gives the file open as `fd`, being made in `folder`, the owner and group of the file it is
   * to replace (`replacing`, with --overwrite), or without one there the folder's.
   */
  giveFile(fd: number, folder: string, replacing?: string): void {
    const replaced =
      replacing === undefined ? undefined : lstatSync(replacing, { throwIfNoEntry: false });
    if (replaced && !replaced.isDirectory()) {
      const owner = { uid: replaced.uid, gid: replaced.gid, dev: replaced.dev };
      this.change(owner, () => fchownSync(fd, owner.uid, owner.gid));
      return;
    }
    this.give(folder, (owner) => fchownSync(fd, owner.uid, owner.gid));
  }

  /** Gives `item` (a folder or a link just made) the owner and group of the folder it is in. */
  giveItem(item: string): void {
    const owner = this.give(path.dirname(item), (to) => lchownSync(item, to.uid, to.gid));
    // A folder made takes the owner it was given, for what is made in it.
    this.ownerOfFolder.set(item, owner);
  }

  private give(folder: string, change: (owner: Owner) => void): FolderOwner {
    let owner = this.ownerOfFolder.get(folder);
    if (!owner) {
      const stats = lstatSync(folder);
      owner = { uid: stats.uid, gid: stats.gid, dev: stats.dev };
      this.ownerOfFolder.set(folder, owner);
    }
    this.change(owner, () => change(owner));
    return owner;
  }

  /** Runs `change`, giving an item `owner`, unless it needs none or the disk takes none. */
  private change(owner: FolderOwner, change: () => void): void {
    if (owner.uid === this.self.uid && owner.gid === this.self.gid) return;
    if (this.refusingDisks.has(owner.dev)) return;
    try {
      change();
      this.given += 1;
    } catch (error) {
      const code = systemErrorCode(error);
      if (code === undefined || !OWNERS_NOT_KEPT.has(code)) throw error;
      // The disk's own owner stands, as its own permissions do (modesNotKept).
      this.refusingDisks.add(owner.dev);
    }
  }
}
