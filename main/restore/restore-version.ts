import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  lstatSync,
  lutimesSync,
  openSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { chmod, mkdir, utimes } from 'node:fs/promises';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { CarFormatError, cidText, RAW_CODEC, readCar } from '../protocol/index.ts';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { ServiceClient } from '../service/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { fileBytes, type FileDag } from './file-bytes.ts';
import { fsyncFully, writeFully } from './file-writes.ts';
import { walkTree, type TreeEntry } from './walk-tree.ts';

// Restores a version (or one path in it) into a folder: the tree comes from the metadata CAR,
// leaves from the storage host, each verified against its CID; files are written (several at
// a time) to a temporary name, fsynced, given their mode and mtime, and renamed. Existing files are
// kept unless `overwrite`: a restored copy then gets a " (restored)" suffix.

/** At most this many leaves, and this many bytes, per blocks/car request. */
const LEAF_BATCH = 256;
const LEAF_BATCH_BYTES = 8 * 1024 * 1024;
const FILES_IN_FLIGHT = 8;

export interface RestoreInput {
  readonly client: ServiceClient;
  readonly storageHost: string;
  /** The version's tree, from its metadata CAR. */
  readonly tree: TreeIndex;
  readonly targetDir: string;
  /** Only this path of the version ('' or undefined: everything). */
  readonly subPath?: string;
  readonly overwrite: boolean;
}

export interface RestoreResult {
  readonly files: number;
  readonly directories: number;
  readonly symlinks: number;
  readonly bytes: number;
  readonly renamed: readonly string[];
}

function checkName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new EngineError(
      'protocol',
      `the version holds an unsafe name ${JSON.stringify(name)}; restore stopped`,
    );
  }
}

/** Whether anything (a file, folder or link) has this name; other errors are real errors. */
function exists(file: string): boolean {
  return lstatSync(file, { throwIfNoEntry: false }) !== undefined;
}

/** A free name beside `file`; `claimed` holds names this restore will write but has not yet. */
function freeName(file: string, claimed: ReadonlySet<string>): string {
  for (let index = 1; ; index += 1) {
    const candidate = `${file} (restored${index === 1 ? '' : ` ${index}`})`;
    if (!claimed.has(candidate) && !exists(candidate)) return candidate;
  }
}

export async function restoreVersion(input: RestoreInput): Promise<RestoreResult> {
  const index = input.tree;
  const root = CID.asCID(index.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  // Leaves come in batches through blocks/car, each block checked against its CID by readCar.
  // A batch is the next leaves in restore order, across small files too, capped in bytes. While
  // files are written from one batch, the next one is fetched, so memory stays at about two.
  const cache = new Map<string, Uint8Array>();
  let cachedBytes = 0;
  const order: string[] = [];
  const position = new Map<string, number>();
  let fetching: Promise<void> = Promise.resolve();
  /** Position in `order` after the last leaf asked for so far. */
  let askedUpTo = 0;
  const fetchFrom = async (cid: string): Promise<void> => {
    const start = position.get(cid) ?? 0;
    const batch = [cid];
    let batchBytes = index.leaves.get(cid) ?? 0;
    let next = start + 1;
    for (; next < order.length && batch.length < LEAF_BATCH; next += 1) {
      const leaf = order[next] ?? '';
      if (cache.has(leaf) || leaf === cid) continue;
      const size = index.leaves.get(leaf) ?? 0;
      if (batchBytes + size > LEAF_BATCH_BYTES) break;
      batchBytes += size;
      batch.push(leaf);
    }
    askedUpTo = Math.max(askedUpTo, next);
    const unique = [...new Set(batch)];
    try {
      for await (const item of readCar(await input.client.blocksCar(input.storageHost, unique), {
        maxBlockBytes: 4 * 1024 * 1024,
      })) {
        if (item.type !== 'block') continue;
        const key = cidText(item.cid);
        cachedBytes += item.bytes.length - (cache.get(key)?.length ?? 0);
        cache.set(key, item.bytes);
      }
    } catch (error) {
      if (error instanceof CarFormatError) {
        throw new EngineError(
          'protocol',
          `the server sent a damaged block (${error.message}); restore stopped`,
          { cause: error },
        );
      }
      throw error;
    }
  };
  let prefetching = false;
  /** Starts on the next batch once less than one batch is left waiting to be written. */
  const prefetch = (): void => {
    const next = order[askedUpTo];
    if (prefetching || next === undefined || cachedBytes >= LEAF_BATCH_BYTES) return;
    prefetching = true;
    fetching = fetching.then(async () => {
      try {
        if (!cache.has(next)) await fetchFrom(next);
      } finally {
        prefetching = false;
      }
    });
    // A failure surfaces to the next read that waits on `fetching`; every leaf in order is
    // read, so one does, unless the restore already failed for another reason.
    fetching.catch(() => undefined);
  };
  /** A leaf from the batches, fetching the batch that starts with it when it is not there. */
  const leaf = async (cid: CID): Promise<Uint8Array> => {
    const key = cidText(cid);
    if (!cache.has(key)) {
      fetching = fetching.then(() => (cache.has(key) ? undefined : fetchFrom(key)));
      await fetching;
    }
    const bytes = cache.get(key);
    if (!bytes) throw new EngineError('protocol', `block ${key} did not come back from the server`);
    cache.delete(key);
    cachedBytes -= bytes.length;
    prefetch();
    return bytes;
  };
  const dag: FileDag = { node: (cid) => index.nodes.get(cidText(cid)), leaf };
  /** The leaves of a file in read order; [] for directories and symlinks. */
  const leavesOf = (cid: CID, depth = 0): string[] => {
    const node = index.nodes.get(cidText(cid));
    // Too deep for any real layout: fileBytes refuses such a file when it comes to it.
    if (!node || depth > 32) return [];
    const decoded = dagPb.decode(node);
    if (!decoded.Data || UnixFS.unmarshal(decoded.Data).type !== 'file') return [];
    return decoded.Links.flatMap((link) =>
      link.Hash.code === RAW_CODEC ? [cidText(link.Hash)] : leavesOf(link.Hash, depth + 1),
    );
  };

  const wanted = (input.subPath ?? '').split('/').filter((part) => part !== '');
  const result = { files: 0, directories: 0, symlinks: 0, bytes: 0, renamed: [] as string[] };
  const directoryTimes: Array<{
    dir: string;
    mode: number | undefined;
    mtime: number | undefined;
  }> = [];
  await mkdir(input.targetDir, { recursive: true });
  let matched = false;

  async function restoreFile(entry: TreeEntry, target: string): Promise<void> {
    const { mtimeSeconds } = entry;
    if (entry.kind === 'symlink') {
      rmSync(target, { force: true });
      symlinkSync(entry.target ?? '', target);
      if (mtimeSeconds !== undefined) lutimesSync(target, mtimeSeconds, mtimeSeconds);
      result.symlinks += 1;
      return;
    }
    const temporary = path.join(
      path.dirname(target),
      `.${path.basename(target)}.canopy-${randomBytes(4).toString('hex')}`,
    );
    const fd = openSync(
      temporary,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
      0o600,
    );
    try {
      for await (const chunk of fileBytes(entry.cid, dag)) {
        await writeFully(fd, chunk);
        result.bytes += chunk.length;
      }
      await fsyncFully(fd);
    } catch (error) {
      closeSync(fd);
      rmSync(temporary, { force: true });
      throw error;
    }
    closeSync(fd);
    if (entry.mode !== undefined) chmodSync(temporary, entry.mode);
    if (mtimeSeconds !== undefined) utimesSync(temporary, mtimeSeconds, mtimeSeconds);
    renameSync(temporary, target);
    result.files += 1;
  }

  // First pass, metadata only: what will be restored, in order, and its leaves.
  const planned: TreeEntry[] = [];
  for (const entry of walkTree(root, index.nodes)) {
    const parts = entry.parts;
    if (wanted.length > 0 && !wanted.every((part, i) => i >= parts.length || parts[i] === part))
      continue;
    planned.push(entry);
    if (entry.kind !== 'file') continue;
    for (const leaf of leavesOf(entry.cid)) {
      if (!position.has(leaf)) position.set(leaf, order.length);
      order.push(leaf);
    }
  }

  const inFlight = new Set<Promise<void>>();
  const claimed = new Set<string>();
  let failure: Error | undefined;
  for (const entry of planned) {
    const parts = entry.parts;
    for (const part of parts) checkName(part);
    // Keep entries on the wanted path: its ancestors are skipped, the entry and below kept.
    if (parts.length < wanted.length) continue;
    matched = true;
    const relative = parts.slice(Math.max(0, wanted.length - 1)).join('/');
    const destination = relative === '' ? input.targetDir : path.join(input.targetDir, relative);
    if (entry.kind === 'directory') {
      await mkdir(destination, { recursive: true });
      directoryTimes.push({ dir: destination, mode: entry.mode, mtime: entry.mtimeSeconds });
      result.directories += 1;
      continue;
    }
    // Files are written a few at a time: each waits on its own fsync, and the disk takes
    // several at once about as fast as one. Their folders exist already (parents come first).
    if (inFlight.size >= FILES_IN_FLIGHT) await Promise.race(inFlight);
    if (failure !== undefined) break;
    // Names are settled here, in order, before the write starts: a file still being written
    // must count as taken, or two entries could be renamed onto one name.
    let target = destination;
    if ((claimed.has(target) || exists(target)) && !input.overwrite) {
      target = freeName(destination, claimed);
      result.renamed.push(path.relative(input.targetDir, target));
    }
    claimed.add(target);
    const writing: Promise<void> = restoreFile(entry, target)
      .catch((error: unknown) => {
        failure ??= error instanceof Error ? error : new Error(String(error));
      })
      .finally(() => {
        inFlight.delete(writing);
        // Written and renamed (or the restore is stopping): the name now shows on disk.
        claimed.delete(target);
      });
    inFlight.add(writing);
  }
  // Every write settles before the first failure is reported: none is left running.
  await Promise.all(inFlight);
  if (failure !== undefined) throw failure instanceof Error ? failure : new Error(String(failure));
  if (!matched) throw new EngineError('not_found', `no ${input.subPath ?? ''} in this version`);
  // Deepest first, after their contents, so writing files does not change them again.
  for (const { dir, mode, mtime } of directoryTimes.reverse()) {
    if (mode !== undefined) await chmod(dir, mode);
    if (mtime !== undefined) await utimes(dir, mtime, mtime);
  }
  return result;
}
