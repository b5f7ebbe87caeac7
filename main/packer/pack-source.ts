import { constants } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import { importer, type ImportCandidate } from 'ipfs-unixfs-importer';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { DAG_PB_CODEC, RAW_CODEC } from '../protocol/index.ts';
import {
  walkSource,
  type ExcludeRules,
  type SkippedItem,
  type SourceEntry,
} from '../scanner/index.ts';
import { CHUNK_BYTES, unixfsImporterOptions } from './unixfs-settings.ts';

// Turns a source folder into a UnixFS tree (§17.1): raw-leaf chunks go to `onLeaf` as they are
// made (the caller stages the ones the bucket lacks), and the dag-pb nodes plus the manifest
// form the metadata CAR. Memory holds the dag-pb nodes, never file contents.

const ROOT = 'root';

export interface PackInput {
  readonly sourceDir: string;
  readonly sourceLabel: string;
  readonly deviceFingerprint: string;
  readonly createdAtSeconds: number;
  /** Called once per distinct leaf of the new tree. */
  readonly onLeaf: (cid: CID, bytes: Uint8Array) => Promise<void>;
  readonly onSkip: (item: SkippedItem) => void;
  readonly rules?: ExcludeRules;
  readonly onExcluded?: (relativePath: string) => void;
  /** Test seam: runs after a file's last byte was read, before it is checked for changes. */
  readonly afterFileRead?: (relativePath: string) => Promise<void>;
}

export interface PackedTree {
  readonly rootCid: CID;
  readonly manifestCid: CID;
  /** Manifest first, then dag-pb nodes ordered by CID: the same tree gives the same CAR. */
  readonly metadataBlocks: ReadonlyArray<{ cid: CID; bytes: Uint8Array }>;
  /** Every distinct leaf of the tree with its size. */
  readonly leaves: ReadonlyMap<string, number>;
  readonly fileCount: number;
  readonly totalBytes: number;
  /** Files whose size or mtime changed while they were read: their bytes may be torn. */
  readonly changedWhileRead: readonly string[];
}

function mtimeOf(mtimeNs: bigint): { secs: bigint; nsecs: number } {
  return { secs: mtimeNs / 1_000_000_000n, nsecs: Number(mtimeNs % 1_000_000_000n) };
}

/**
 * Reads an already opened file in 1 MiB chunks and closes it at the end; calls `onChanged` when
 * its size or mtime at the end differs from what the scan saw.
 */
async function* fileContent(
  handle: FileHandle,
  scanned: { size: number; mtimeNs: bigint },
  afterRead: () => Promise<void>,
  onChanged: () => void,
): AsyncGenerator<Uint8Array> {
  try {
    for (;;) {
      const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, CHUNK_BYTES, null);
      if (bytesRead === 0) break;
      yield buffer.subarray(0, bytesRead);
    }
    await afterRead();
    const after = await handle.stat({ bigint: true });
    if (Number(after.size) !== scanned.size || after.mtimeNs !== scanned.mtimeNs) onChanged();
  } finally {
    await handle.close();
  }
}

export async function packSource(input: PackInput): Promise<PackedTree> {
  const dagNodes = new Map<string, { cid: CID; bytes: Uint8Array }>();
  const leaves = new Map<string, number>();
  let fileCount = 0;
  let totalBytes = 0;
  const changedWhileRead: string[] = [];

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
      const key = cid.toString();
      if (cid.code === RAW_CODEC) {
        if (!leaves.has(key)) {
          leaves.set(key, block.length);
          await input.onLeaf(cid, block);
        }
      } else if (cid.code === DAG_PB_CODEC) {
        dagNodes.set(key, { cid, bytes: block });
      } else {
        throw new Error(`unexpected block codec ${cid.code}`);
      }
      return cid;
    },
  };

  const rootStats = await lstat(input.sourceDir, { bigint: true });
  const sourceDir = input.sourceDir;
  async function* candidates(): AsyncGenerator<ImportCandidate> {
    yield { path: ROOT, mode: Number(rootStats.mode & 0o7777n), mtime: mtimeOf(rootStats.mtimeNs) };
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
        yield { path: candidatePath, mode: entry.mode, mtime };
        return;
      case 'symlink':
        yield { path: candidatePath, link: entry.target, mode: entry.mode, mtime };
        return;
      case 'file': {
        const file = path.join(sourceDir, entry.path);
        // Open now, so an unreadable or vanished file is skipped here instead of failing the
        // importer halfway through the tree; the same handle is then read (no second open).
        let handle: FileHandle;
        try {
          handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          input.onSkip({
            path: entry.path,
            reason:
              code === 'EACCES' || code === 'EPERM'
                ? 'permission denied'
                : code === 'ENOENT'
                  ? 'deleted before it was read'
                  : String(error),
          });
          return;
        }
        fileCount += 1;
        totalBytes += entry.size;
        yield {
          path: candidatePath,
          content: fileContent(
            handle,
            entry,
            () => input.afterFileRead?.(entry.path) ?? Promise.resolve(),
            () => changedWhileRead.push(entry.path),
          ),
          mode: entry.mode,
          mtime,
        };
        return;
      }
      default: {
        const unreachable: never = entry;
        throw new Error(`unknown entry ${String(unreachable)}`);
      }
    }
  }

  let rootCid: CID | undefined;
  for await (const result of importer(candidates(), blockstore, unixfsImporterOptions())) {
    if (result.path === ROOT) rootCid = result.cid;
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
  const nodes = [...dagNodes.values()].sort((a, b) =>
    a.cid.toString() < b.cid.toString() ? -1 : 1,
  );
  return {
    rootCid,
    manifestCid,
    metadataBlocks: [{ cid: manifestCid, bytes: manifestBytes }, ...nodes],
    leaves,
    fileCount,
    totalBytes,
    changedWhileRead,
  };
}
