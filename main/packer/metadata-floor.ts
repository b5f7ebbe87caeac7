import type { SourceEntry } from '../scanner/index.ts';
import { folderOf } from '../state/file-index.ts';
import { CHUNK_BYTES } from './unixfs-settings.ts';

// The least a source's metadata CAR can hold, counted from the walk alone, before a byte of a
// file is read. A version's metadata may be at most 128 MiB (§14), some 800 000 files; the
// packer finds a larger source once its CAR passes that, which is only after reading about
// 800 000 files (for a photo library, hours). A source whose floor is already past the limit
// is refused after the walk instead.
//
// A floor, never more than the CAR made of the same tree will be: a source that fits must never
// be refused. So each node counts only the bytes it cannot be without (a CID is 36 bytes, a
// varint one at least, a name its UTF-8), and a node counts once however often it stands in the
// tree, as the CAR holds it once: a file's node is known by what it encodes (its size, mode and
// mtime; its bytes are not read yet), a folder's by its mode, mtime, and its entries' names and
// nodes. Two nodes the same are always known the same; two different ones known the same (a
// 32-bit hash's collision, or files of one size, mode and mtime but other bytes) count once,
// which lowers the floor. A file the walk finds but packing cannot read still counts: a source
// would have to be near the limit, with thousands of such files, to be refused for them.

const CID_BYTES = 36;
/** A CAR section's least framing: a varint of its length, then its block's CID. */
const SECTION_BYTES = 1 + CID_BYTES;
/** A link's Hash field (tag, length, CID), Name's tag, Tsize (tag, a varint), and the Links tag and length. */
const LINK_BYTES = 2 + CID_BYTES + 1 + 2 + 2;
/** A leaf's link in its File node: Hash, Tsize and framing; and its blocksize in the node's Data. */
const LEAF_BYTES = 2 + CID_BYTES + 2 + 2 + 2;
/** A UnixFS node's Data field with its Type, and an mtime field of one-byte seconds at least. */
const DATA_BYTES = 2 + 2 + 4;

/** Bytes of `value` as a varint. */
function varintBytes(value: number): number {
  let bytes = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes += 1;
  return bytes;
}

/** FNV-1a of `text`, 32 bits, as a small integer (a Set holds it without boxing it). */
function hashOf(text: string): number {
  let hash = 0x811c9dc5;
  for (let at = 0; at < text.length; at += 1) {
    hash ^= text.charCodeAt(at);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

interface OpenFolder {
  readonly path: string;
  readonly meta: string;
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
  private readonly open: OpenFolder[] = [{ path: '', meta: '', links: 0, entries: 0 }];

  /** The floor of the nodes of the files and the closed folders so far. */
  get bytes(): number {
    return this.counted;
  }

  /** Counts `entry`, given in the walk's order: a folder, then what is in it. */
  add(entry: SourceEntry): void {
    const parent = this.closeDownTo(folderOf(entry.path) ?? '');
    const name = entry.path.slice(entry.path.lastIndexOf('/') + 1);
    const nameBytes = Buffer.byteLength(name, 'utf8');
    parent.links += LINK_BYTES + varintBytes(nameBytes) + nameBytes;
    const meta = `${entry.mode & 0xfff}:${entry.mtimeNs}`;
    if (entry.kind === 'directory') {
      this.open.push({ path: entry.path, meta, links: 0, entries: 0 });
      return;
    }
    const key =
      entry.kind === 'file'
        ? hashOf(`f:${entry.size}:${meta}`)
        : hashOf(`l:${meta}:${entry.target}`);
    parent.entries = (parent.entries + hashOf(`${name}/${key}`)) | 0;
    if (this.fileAndLinkKeys.has(key)) return;
    this.fileAndLinkKeys.add(key);
    this.counted +=
      SECTION_BYTES +
      DATA_BYTES +
      (entry.kind === 'file'
        ? Math.ceil(entry.size / CHUNK_BYTES) * LEAF_BYTES
        : Buffer.byteLength(entry.target, 'utf8'));
  }

  /** Closes every folder still open, the source folder last: the floor of the whole tree. */
  finish(): number {
    this.closeDownTo(null);
    return this.counted;
  }

  /** Closes the folders the walk has left, and returns the one it is in (`path`). */
  private closeDownTo(path: string | null): OpenFolder {
    for (;;) {
      const folder = this.open.at(-1);
      if (!folder) throw new Error('the walk went above the source folder');
      if (folder.path === path) return folder;
      this.open.pop();
      const key = hashOf(`d:${folder.meta}:${folder.entries}`);
      if (!this.folderKeys.has(key)) {
        this.folderKeys.add(key);
        this.counted += SECTION_BYTES + DATA_BYTES + folder.links;
      }
      const above = this.open.at(-1);
      if (!above) {
        if (path !== null) throw new Error(`the walk left the source folder for ${path}`);
        return folder;
      }
      const name = folder.path.slice(folder.path.lastIndexOf('/') + 1);
      above.entries = (above.entries + hashOf(`${name}/${key}`)) | 0;
    }
  }
}
