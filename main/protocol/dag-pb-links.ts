import { SHA2_256_CODE } from './cid.ts';
import { protobufVarintAt } from './protobuf-varint.ts';

// The links of a dag-pb node, read straight from its bytes: each link's codec, where its
// SHA-256 digest lies, and its Tsize. @ipld/dag-pb's decode makes a CID, a link object and a
// name string for every link, and reading a version's tree (its leaves, its nodes to reuse)
// spent most of its time there: about 2 s of each kind on a tree of 400 000 files.
//
// Only the shape this client writes and §3 allows is read here: every link a CIDv1 of one
// byte's codec and a sha2-256 multihash of 32 bytes, fields in dag-pb's order. Anything else
// reads as "not understood" (-1), and the caller decodes the node with @ipld/dag-pb instead.

const DIGEST_BYTES = 32;
/** A CIDv1's bytes: version, codec, multihash code and length, digest. */
const CID_BYTES = 4 + DIGEST_BYTES;
/** PBNode: Data (field 1) and Links (field 2), both length-delimited. */
const NODE_DATA_TAG = 0x0a;
const NODE_LINK_TAG = 0x12;
/** PBLink: Hash (1) and Name (2) length-delimited, Tsize (3) a varint. */
const LINK_HASH_TAG = 0x0a;
const LINK_NAME_TAG = 0x12;
const LINK_TSIZE_TAG = 0x18;
/** UnixFS Data: Type (1), a varint, written first. */
const UNIXFS_TYPE_TAG = 0x08;

/** UnixFS's node types (ipfs-unixfs), as `unixfsType` reads them. */
export const UNIXFS_TYPES = {
  raw: 0,
  directory: 1,
  file: 2,
  metadata: 3,
  symlink: 4,
  hamtShard: 5,
} as const;

export class DagPbLinks {
  /** Per link read: its CID's codec, where its digest starts in the bytes, and its Tsize. */
  readonly codecs: number[] = [];
  readonly digestAt: number[] = [];
  readonly tsizes: number[] = [];
  /** Where each link's name starts in the bytes, and its length (0 with no name). */
  readonly nameAt: number[] = [];
  readonly nameLength: number[] = [];
  /**
   * The UnixFS type of the node read last (UNIXFS_TYPES), -1 when its Data names none: the Type
   * its Data holds first, where Canopy writes it. ipfs-unixfs takes a Type given again later
   * instead; a reader that must agree with it looks for one (restore/quick-shape.ts).
   */
  unixfsType = -1;
  /** Where the UnixFS Data of the node read last lies in its bytes; length -1 with none. */
  dataAt = 0;
  dataLength = -1;
  private bytes: Uint8Array = new Uint8Array(0);
  /** The read position. */
  private readonly cursor = { at: 0 };

  /**
   * Reads the links of the node `bytes` into this reader's arrays, replacing those of the node
   * before: the number of links, or -1 when the node is not of the shape read here.
   */
  read(bytes: Uint8Array): number {
    this.bytes = bytes;
    this.cursor.at = 0;
    this.codecs.length = 0;
    this.digestAt.length = 0;
    this.tsizes.length = 0;
    this.nameAt.length = 0;
    this.nameLength.length = 0;
    this.unixfsType = -1;
    this.dataAt = 0;
    this.dataLength = -1;
    let linksBeforeData = false;
    while (this.cursor.at < bytes.length) {
      const tag = this.varint();
      const length = this.varint();
      const end = this.cursor.at + length;
      if (length < 0 || end > bytes.length) return -1;
      if (tag === NODE_LINK_TAG) {
        // Links on both sides of the Data are no node, for @ipld/dag-pb as here.
        if (linksBeforeData || !this.link(end)) return -1;
      } else if (tag === NODE_DATA_TAG) {
        // Nor is a second Data.
        if (this.dataLength >= 0) return -1;
        linksBeforeData = this.codecs.length > 0;
        this.dataAt = this.cursor.at;
        this.dataLength = length;
        this.unixfsType = this.typeIn(end);
      } else {
        return -1;
      }
      this.cursor.at = end;
    }
    return this.codecs.length;
  }

  /** The digest of link `index` of the node read last: a view of its bytes. */
  digest(index: number): Uint8Array {
    const start = this.digestAt[index] ?? 0;
    return this.bytes.subarray(start, start + DIGEST_BYTES);
  }

  /** The name's bytes of link `index` of the node read last: a view of its bytes. */
  name(index: number): Uint8Array {
    const start = this.nameAt[index] ?? 0;
    return this.bytes.subarray(start, start + (this.nameLength[index] ?? 0));
  }

  /** The Type of the UnixFS Data at the read position (its first field), or -1. */
  private typeIn(end: number): number {
    if (this.cursor.at >= end || this.bytes[this.cursor.at] !== UNIXFS_TYPE_TAG) return -1;
    this.cursor.at += 1;
    const type = this.varint();
    return this.cursor.at <= end ? type : -1;
  }

  private link(end: number): boolean {
    let digestAt = -1;
    let codec = -1;
    let tsize = 0;
    let nameAt = 0;
    let nameLength = 0;
    /** The last field read (its tag), 0 before any: each comes once, in the order of tags. */
    let last = 0;
    while (this.cursor.at < end) {
      const tag = this.varint();
      // Hash first, then Name, then Tsize, as @ipld/dag-pb takes them: a link of fields out
      // of order or given twice is no node to it.
      if (tag <= last || (last === 0 && tag !== LINK_HASH_TAG)) return false;
      last = tag;
      if (tag === LINK_TSIZE_TAG) {
        tsize = this.varint();
        if (tsize < 0) return false;
        continue;
      }
      const length = this.varint();
      if (length < 0 || this.cursor.at + length > end) return false;
      if (tag === LINK_HASH_TAG) {
        const at = this.cursor.at;
        const b = this.bytes;
        if (
          length !== CID_BYTES ||
          b[at] !== 1 ||
          (b[at + 1] ?? 0x80) >= 0x80 ||
          b[at + 2] !== SHA2_256_CODE ||
          b[at + 3] !== DIGEST_BYTES
        )
          return false;
        codec = b[at + 1] ?? -1;
        digestAt = at + 4;
      } else if (tag === LINK_NAME_TAG) {
        nameAt = this.cursor.at;
        nameLength = length;
      } else {
        return false;
      }
      this.cursor.at += length;
    }
    if (digestAt < 0 || this.cursor.at !== end) return false;
    this.codecs.push(codec);
    this.digestAt.push(digestAt);
    this.tsizes.push(tsize);
    this.nameAt.push(nameAt);
    this.nameLength.push(nameLength);
    return true;
  }

  /** A varint at the read position, moved past; -1 when cut short or past 2^53. */
  private varint(): number {
    return protobufVarintAt(this.bytes, this.cursor, this.bytes.length);
  }
}
