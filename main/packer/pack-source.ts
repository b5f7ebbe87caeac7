import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import { importer, type BufferImporter, type ImportCandidate } from 'ipfs-unixfs-importer';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import { cidFromSha256, cidText, DAG_PB_CODEC, RAW_CODEC } from '../protocol/index.ts';
import {
  sourceRootEntry,
  walkSource,
  type ExcludeRules,
  type SkippedItem,
  type SourceEntry,
} from '../scanner/index.ts';
import {
  ChangedWhileRead,
  readSmallFile,
  SMALL_FILE_BYTES,
  unreadableReason,
} from './small-file.ts';
import { fileBuilder } from './file-builder.ts';
import { ChunkBuffers, largeFileChunks } from './large-file-chunks.ts';
import { MetadataNodes } from './metadata-nodes.ts';
import { unixfsImporterOptions } from './unixfs-settings.ts';

// Turns a source folder into a UnixFS tree (§17.1): raw-leaf chunks go to `onLeaf` as they are
// made (the caller stages the ones the bucket lacks), and the dag-pb nodes plus the manifest
// form the metadata CAR. Memory holds the dag-pb nodes, never file contents.
//
// A file the caller knows to be unchanged (`reuse`, fed by the file index) is not read: its
// leaves are handed to the importer as they were, and the importer lays the file node out
// again from them, with the same settings, so its CID is the one reading would give.

const ROOT = 'root';

const EMPTY_LEAF_CID = cidFromSha256(RAW_CODEC, createHash('sha256').digest());

export interface PackInput {
  readonly sourceDir: string;
  readonly sourceLabel: string;
  readonly deviceFingerprint: string;
  readonly createdAtSeconds: number;
  /**
   * Called once per distinct leaf of the new tree, with where its bytes were first read and
   * its CID's text: the very string the tree's `leaves` holds, so keeping it costs nothing.
   * The bytes are lent: their buffer is read into again once the returned promise settles,
   * so a callee that keeps them past that must copy them.
   */
  readonly onLeaf: (cid: CID, bytes: Uint8Array, origin: LeafOrigin, text: string) => Promise<void>;
  readonly onSkip: (item: SkippedItem) => void;
  readonly rules?: ExcludeRules;
  readonly onExcluded?: (relativePath: string) => void;
  /** Test seam: runs after a file's last byte was read, before it is checked for changes. */
  readonly afterFileRead?: (relativePath: string) => Promise<void>;
  /**
   * The leaves, in order, of a file whose content is known to be unchanged since they were
   * made; undefined to read it. Leaves returned here are not passed to `onLeaf`.
   */
  readonly reuse?: (file: ScannedFile) => readonly ReusedLeaf[] | undefined;
  /** Progress: called with each chunk's size as it is read, and once per file packed. */
  readonly onBytesRead?: (bytes: number) => void;
  readonly onFilePacked?: (file: ScannedFile, reused: boolean) => void;
}

export type ScannedFile = Extract<SourceEntry, { kind: 'file' }>;

/** Where a leaf's bytes lie in the source: a file relative to the source folder, and an offset. */
export interface LeafOrigin {
  readonly path: string;
  readonly offset: number;
}

export interface ReusedLeaf {
  readonly cid: CID;
  readonly size: number;
}

/** An entry of the packed tree as the file index records it; '' is the source folder. */
export interface PackedEntry {
  readonly path: string;
  readonly kind: 'file' | 'directory' | 'symlink';
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ino: bigint;
  readonly mode: number;
  readonly target: string | null;
  /** A file's File node; null for folders and symlinks. */
  readonly cid: string | null;
}

/** What the file index keeps of a walked entry; a file's CID is added once it is packed. */
export function packedEntryOf(entry: SourceEntry, cid: string | null = null): PackedEntry {
  return {
    path: entry.path,
    kind: entry.kind,
    size: entry.kind === 'file' ? entry.size : 0,
    mtimeNs: entry.mtimeNs,
    ino: entry.ino,
    mode: entry.mode,
    target: entry.kind === 'symlink' ? entry.target : null,
    cid,
  };
}

export interface PackedTree {
  readonly rootCid: CID;
  readonly manifestCid: CID;
  /** Manifest first, then dag-pb nodes ordered by CID: the same tree gives the same CAR. */
  readonly metadataBlocks: Iterable<{ cid: CID; bytes: Uint8Array }>;
  /** Every distinct leaf of the tree with its size. */
  readonly leaves: ReadonlyMap<string, number>;
  readonly fileCount: number;
  readonly totalBytes: number;
  /** Files whose size or mtime changed while they were read: their bytes may be torn. */
  readonly changedWhileRead: readonly string[];
  /**
   * Every entry of the tree, the source folder first; files carry their node's CID. A file
   * the importer did not report (it cannot happen, but the index must not lie) is left out.
   */
  readonly entries: readonly PackedEntry[];
  readonly filesReused: number;
  readonly bytesRead: number;
}

function mtimeOf(mtimeNs: bigint): { secs: bigint; nsecs: number } {
  return { secs: mtimeNs / 1_000_000_000n, nsecs: Number(mtimeNs % 1_000_000_000n) };
}

export async function packSource(input: PackInput): Promise<PackedTree> {
  const dagNodes = new MetadataNodes();
  const leaves = new Map<string, number>();
  let fileCount = 0;
  let totalBytes = 0;
  const changedWhileRead: string[] = [];
  let bytesRead = 0;
  let filesReused = 0;
  /** Candidate path → a file opened for the importer, until it is read to the end and closed. */
  const openFiles = new Map<string, FileHandle>();
  const chunkBuffers = new ChunkBuffers();
  /** Candidate path → the scanned file, until the importer reports its node. */
  const pendingFiles = new Map<string, ScannedFile>();
  /** Candidate path → the content of a small file, read whole, until it is packed. */
  const smallFiles = new Map<string, Uint8Array>();
  /** Candidate path → leaves of a file that is not read again. */
  const reusedLeaves = new Map<string, readonly ReusedLeaf[]>();
  const entries: PackedEntry[] = [];

  const blockstore = {
    async put(
      cid: CID,
      bytes: Uint8Array | AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    ): Promise<CID> {
      let block: Uint8Array;
      if (bytes instanceof Uint8Array) block = bytes;
      else {
        const parts: Uint8Array[] = [];
        for await (const part of bytes) parts.push(part);
        block = Buffer.concat(parts);
      }
      // Raw leaves come through putLeaf, which knows where they were read.
      if (cid.code !== DAG_PB_CODEC) throw new Error(`unexpected block codec ${cid.code}`);
      dagNodes.put(cidText(cid), block);
      return cid;
    },
  };

  /** Records a leaf the first time the tree holds it, and hands it to the caller. */
  async function putLeaf(cid: CID, bytes: Uint8Array, origin: LeafOrigin): Promise<void> {
    const key = cidText(cid);
    if (leaves.has(key)) return;
    leaves.set(key, bytes.length);
    await input.onLeaf(cid, bytes, origin, key);
  }

  // The importer's own raw-leaf buffer importer, reading each file itself: a small file was
  // read whole already; a reused file is not read, its known leaves stand in for the chunks;
  // a large file is read chunk by chunk into one reused buffer. Every file reaches the
  // importer with empty content, so the importer's chunker, which would keep hold of a
  // chunk past the point the buffer is reused, never sees a byte.
  const bufferImporter: BufferImporter = async function* (file) {
    // The scanned entry's own path string, which the file index keeps too: a slice of the
    // candidate path would keep a second copy of every path alive in the upload plan.
    const scanned =
      file.originalPath === undefined ? undefined : pendingFiles.get(file.originalPath);
    const sourcePath = scanned?.path ?? file.originalPath?.slice(ROOT.length + 1) ?? '';
    const small = file.originalPath === undefined ? undefined : smallFiles.get(file.originalPath);
    if (small) {
      // Read already, and one chunk at most: no need of the chunker's buffering and copies.
      smallFiles.delete(file.originalPath ?? '');
      yield async () => {
        const cid = CID.createV1(raw.code, await sha256.digest(small));
        await putLeaf(cid, small, { path: sourcePath, offset: 0 });
        return { cid, size: BigInt(small.length), block: small };
      };
      return;
    }
    const known = file.originalPath === undefined ? undefined : reusedLeaves.get(file.originalPath);
    if (known) {
      // The chunker makes one empty chunk of empty content, and the layout needs at least one
      // leaf to make a File node at all; the empty leaf stays out of the node's links.
      for (const leaf of known.length > 0 ? known : [{ cid: EMPTY_LEAF_CID, size: 0 }]) {
        leaves.set(cidText(leaf.cid), leaf.size);
        yield () =>
          Promise.resolve({ cid: leaf.cid, size: BigInt(leaf.size), block: new Uint8Array() });
      }
      return;
    }
    const handle = file.originalPath === undefined ? undefined : openFiles.get(file.originalPath);
    if (!handle || !scanned) throw new Error(`no opened file for ${String(file.originalPath)}`);
    try {
      let offset = 0;
      // Each chunk is a view of a reused buffer: the file builder finishes a leaf (hashed,
      // handed to onLeaf, which is done with the bytes once it settles) before it asks for
      // the next, which is what lets the next read overwrite it.
      for await (const chunk of largeFileChunks(handle, chunkBuffers)) {
        const origin = { path: sourcePath, offset };
        offset += chunk.length;
        bytesRead += chunk.length;
        input.onBytesRead?.(chunk.length);
        yield async () => {
          const cid = CID.createV1(raw.code, await sha256.digest(chunk));
          await putLeaf(cid, chunk, origin);
          return { cid, size: BigInt(chunk.length), block: chunk };
        };
      }
      await input.afterFileRead?.(scanned.path);
      const after = await handle.stat({ bigint: true });
      if (Number(after.size) !== scanned.size || after.mtimeNs !== scanned.mtimeNs)
        changedWhileRead.push(scanned.path);
    } finally {
      openFiles.delete(file.originalPath ?? '');
      await handle.close();
    }
  };

  const rootEntry = sourceRootEntry(input.sourceDir);
  entries.push(packedEntryOf(rootEntry));
  const sourceDir = input.sourceDir;
  async function* candidates(): AsyncGenerator<ImportCandidate> {
    yield { path: ROOT, mode: rootEntry.mode, mtime: mtimeOf(rootEntry.mtimeNs) };
    for await (const entry of walkSource(sourceDir, {
      onSkip: input.onSkip,
      ...(input.rules ? { rules: input.rules } : {}),
      ...(input.onExcluded ? { onExcluded: input.onExcluded } : {}),
    })) {
      const candidatePath = `${ROOT}/${entry.path}`;
      yield* candidateOf(entry, candidatePath);
    }
  }
  async function* candidateOf(
    entry: SourceEntry,
    candidatePath: string,
  ): AsyncGenerator<ImportCandidate> {
    const mtime = mtimeOf(entry.mtimeNs);
    switch (entry.kind) {
      case 'directory':
        entries.push(packedEntryOf(entry));
        yield { path: candidatePath, mode: entry.mode, mtime };
        return;
      case 'symlink':
        entries.push(packedEntryOf(entry));
        yield { path: candidatePath, link: entry.target, mode: entry.mode, mtime };
        return;
      case 'file': {
        const known = input.reuse?.(entry);
        if (known) {
          reusedLeaves.set(candidatePath, known);
          pendingFiles.set(candidatePath, entry);
          fileCount += 1;
          filesReused += 1;
          totalBytes += entry.size;
          yield { path: candidatePath, content: [], mode: entry.mode, mtime };
          return;
        }
        const file = path.join(sourceDir, entry.path);
        // Open now, so an unreadable or vanished file is skipped here instead of failing the
        // importer halfway through the tree; the same handle is then read (no second open).
        const skip = (error: unknown): void =>
          input.onSkip({ path: entry.path, reason: unreadableReason(error) });
        if (entry.size < SMALL_FILE_BYTES) {
          // A small file costs more in thread-pool round trips than in reading: read it in
          // synchronous calls, a few microseconds each when it is in the page cache.
          let small: Uint8Array;
          try {
            small = await readSmallFile(file, entry, () =>
              input.afterFileRead ? input.afterFileRead(entry.path) : undefined,
            );
          } catch (error) {
            if (error instanceof ChangedWhileRead) changedWhileRead.push(entry.path);
            else {
              skip(error);
              return;
            }
            small = error.bytes;
          }
          fileCount += 1;
          totalBytes += entry.size;
          pendingFiles.set(candidatePath, entry);
          bytesRead += small.length;
          input.onBytesRead?.(small.length);
          smallFiles.set(candidatePath, small);
          yield { path: candidatePath, content: [], mode: entry.mode, mtime };
          return;
        }
        let handle: FileHandle;
        try {
          handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
        } catch (error) {
          skip(error);
          return;
        }
        openFiles.set(candidatePath, handle);
        fileCount += 1;
        totalBytes += entry.size;
        pendingFiles.set(candidatePath, entry);
        // Read by the buffer importer, not through the importer's chunker (see there).
        yield { path: candidatePath, content: [], mode: entry.mode, mtime };
        return;
      }
      default: {
        const unreachable: never = entry;
        throw new Error(`unknown entry ${String(unreachable)}`);
      }
    }
  }

  let rootCid: CID | undefined;
  try {
    for await (const result of importer(candidates(), blockstore, {
      ...unixfsImporterOptions(),
      bufferImporter,
      fileBuilder,
    })) {
      if (result.path === ROOT) rootCid = result.cid;
      const file = result.path === undefined ? undefined : pendingFiles.get(result.path);
      if (file && result.path !== undefined) {
        pendingFiles.delete(result.path);
        const reused = reusedLeaves.delete(result.path);
        entries.push(packedEntryOf(file, cidText(result.cid)));
        input.onFilePacked?.(file, reused);
      }
    }
  } finally {
    // A pack that stopped early (a full staging disk) leaves files opened ahead of the importer
    // unread; their content generators never ran, so nothing else would close them.
    await Promise.all([...openFiles.values()].map((handle) => handle.close()));
  }
  if (!rootCid) throw new Error('the importer produced no root directory');

  const manifestBytes = dagCbor.encode({
    version: 1,
    root: rootCid,
    created_at: input.createdAtSeconds,
    device_fingerprint: input.deviceFingerprint,
    source_label: input.sourceLabel,
    file_count: fileCount,
    total_bytes: totalBytes,
  });
  const manifestCid = CID.createV1(dagCbor.code, await sha256.digest(manifestBytes));
  return {
    rootCid,
    manifestCid,
    metadataBlocks: {
      *[Symbol.iterator]() {
        yield { cid: manifestCid, bytes: manifestBytes };
        yield* dagNodes.sorted();
      },
    },
    leaves,
    fileCount,
    totalBytes,
    changedWhileRead,
    entries,
    filesReused,
    bytesRead,
  };
}
