import type { SourceEntry } from '../scanner/index.ts';
import { CHUNK_BYTES } from './unixfs-settings.ts';

// The least a source's metadata CAR can hold, counted from the walk alone, before a byte of a
// file is read. A version's metadata may be at most 128 MiB (§14), some 800 000 files; the
// packer finds a larger source once its CAR passes that, which is only after reading about
// 800 000 files (for a photo library, hours). A source whose floor is already past the limit
// is refused after the walk instead.
//
// A floor, never more than the CAR made of the same tree will be: a source that fits must never
// be refused. So each node counts only the bytes it cannot be without (a CID is 36 bytes, a
// varint one at least, a name as many as its characters), and a node counts once however often
// it stands in the tree, as the CAR holds it once: a file's node is known by what it encodes
// (its size, mode and mtime; its bytes are not read yet), a folder's by its mode, mtime, and its
// entries' names and nodes. Two nodes the same are always known the same; two different ones
// known the same (a 32-bit hash's collision, or files of one size, mode and mtime but other
// bytes) count once, which lowers the floor. A file the walk finds but packing cannot read still
// counts: a source would have to be near the limit, with thousands of such files, to be refused
// for them.

const CID_BYTES = 36;
/** A CAR section's least framing: a varint of its length, then its block's CID. */
const SECTION_BYTES = 1 + CID_BYTES;
/** A link's Hash field (tag, length, CID), Name's tag, Tsize, and its Links field's framing. */
const LINK_BYTES = 2 + CID_BYTES + 1 + 2 + 2;
/** A leaf's link in its File node (Hash, Tsize, framing), and its blocksize in the node's Data. */
const LEAF_BYTES = 2 + CID_BYTES + 2 + 2 + 2;
/** A UnixFS node's Data field with its Type, and an mtime field of one-byte seconds at least. */
const DATA_BYTES = 2 + 2 + 4;

const KIND_FILE = 1;
const KIND_FOLDER = 2;
const KIND_SYMLINK = 3;

/** Bytes of `value` as a varint. */
function varintBytes(value: number): number {
  let bytes = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes += 1;
  return bytes;
}

const FNV_OFFSET = 0x811c9dc5;

/** `hash` (FNV-1a, 32 bits) with `word` added; a small integer, which a Set holds unboxed. */
function withWord(hash: number, word: number): number {
  return Math.imul(hash ^ word, 0x01000193) | 0;
}

/** `hash` with `value` added, an integer of up to 53 bits (a size, a time as a double). */
function withNumber(hash: number, value: number): number {
  return withWord(withWord(hash, value % 0x1_0000_0000), Math.floor(value / 0x1_0000_0000));
}

/** `hash` with each UTF-16 unit of `text` added. */
function withText(hash: number, text: string): number {
  let result = hash;
  for (let at = 0; at < text.length; at += 1) result = withWord(result, text.charCodeAt(at));
  return result;
}

/**
 * What a node keeps of an entry's mode and mtime. The mtime as a double rounds nanoseconds off
 * (times a few hundred nanoseconds apart may count as one): the floor can only be lower.
 */
function metaHash(kind: number, entry: SourceEntry): number {
  return withNumber(
    withWord(withWord(FNV_OFFSET, kind), entry.mode & 0xfff),
    Number(entry.mtimeNs),
  );
}

interface OpenFolder {
  readonly path: string;
  /** Its mode and mtime, hashed. */
  readonly meta: number;
  /** Bytes of its entries' links. */
  links: number;
  /** Its entries, each as a hash of its name and its node's key, summed: in any order, the same. */
  entries: number;
}

export class MetadataFloor {
  private counted = 0;
  /** The keys of the file and symlink nodes counted. */
  private readonly fileAndLinkKeys = new Set<number>();
  private readonly folderKeys = new Set<number>();
  /** The folders the walk is in, the source folder first and the deepest last. */
  private readonly open: OpenFolder[] = [{ path: '', meta: 0, links: 0, entries: 0 }];

  /**
   * Once the floor passes `limitBytes` (a version's most), it counts no more, and lets go of
   * its keys: they would grow with a source of any size, some 30 bytes a file.
   */
  constructor(private readonly limitBytes = Number.POSITIVE_INFINITY) {}

  /** Whether the floor has passed the limit: the source cannot be one version. */
  get over(): boolean {
    return this.counted > this.limitBytes;
  }

  /** Counts `entry`, given in the walk's order: a folder, then what is in it. */
  add(entry: SourceEntry): void {
    if (this.over) return;
    const slash = entry.path.lastIndexOf('/');
    const parent = this.closeDownTo(entry.path.slice(0, Math.max(slash, 0)));
    const name = entry.path.slice(slash + 1);
    // A name's UTF-16 length is at most its UTF-8 length, and quicker to have.
    parent.links += LINK_BYTES + varintBytes(name.length) + name.length;
    if (entry.kind === 'directory') {
      this.open.push({
        path: entry.path,
        meta: metaHash(KIND_FOLDER, entry),
        links: 0,
        entries: 0,
      });
      return;
    }
    const key =
      entry.kind === 'file'
        ? withNumber(metaHash(KIND_FILE, entry), entry.size)
        : withText(metaHash(KIND_SYMLINK, entry), entry.target);
    parent.entries = (parent.entries + withWord(withText(FNV_OFFSET, name), key)) | 0;
    if (this.fileAndLinkKeys.has(key)) return;
    this.fileAndLinkKeys.add(key);
    this.count(
      SECTION_BYTES +
        DATA_BYTES +
        (entry.kind === 'file'
          ? Math.ceil(entry.size / CHUNK_BYTES) * LEAF_BYTES
          : entry.target.length),
    );
  }

  /**
   * Closes every folder still open, the source folder last: the floor of the whole tree, or
   * of as much of it as passed the limit.
   */
  finish(): number {
    if (!this.over) this.closeDownTo(null);
    return this.counted;
  }

  private count(bytes: number): void {
    this.counted += bytes;
    if (!this.over) return;
    this.fileAndLinkKeys.clear();
    this.folderKeys.clear();
  }

  /** Closes the folders the walk has left, and returns the one it is in (`path`). */
  private closeDownTo(path: string | null): OpenFolder {
    for (;;) {
      const folder = this.open.at(-1);
      if (!folder) throw new Error('the walk went above the source folder');
      if (folder.path === path) return folder;
      this.open.pop();
      const key = withWord(folder.meta, folder.entries);
      if (!this.folderKeys.has(key)) {
        this.folderKeys.add(key);
        this.count(SECTION_BYTES + DATA_BYTES + folder.links);
      }
      const above = this.open.at(-1);
      if (!above) {
        if (path !== null) throw new Error(`the walk left the source folder for ${path}`);
        return folder;
      }
      const name = folder.path.slice(folder.path.lastIndexOf('/') + 1);
      above.entries = (above.entries + withWord(withText(FNV_OFFSET, name), key)) | 0;
    }
  }
}
