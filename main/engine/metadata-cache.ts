import { mkdirSync } from 'node:fs';
import { open, rename, rm, utimes } from 'node:fs/promises';
import path from 'node:path';
import { isEngineError } from '../api/index.ts';
import type { ServiceClient } from '../service/index.ts';
import { openBrowsableTree } from '../uploader/index.ts';
import {
  knownActiveVersionIds,
  newStagingDir,
  nodeIndexFileOf,
  rememberVersionTotals,
  removeAbandonedStaging,
  uploadQueue,
  versionTotalsOf,
  type StateDb,
} from '../state/index.ts';
import { tagAsCache } from './cache-tag-file.ts';
import { keptUnlessDiskFull } from './kept-unless-disk-full.ts';
import { METADATA_CACHE_BUDGET_BYTES, trimMetadataCache } from './metadata-cache-trim.ts';

// The device's local copies of versions' metadata CARs (`<home>/metadata/<version>.car`, with
// the index of their nodes beside them): what browsing reads, offline too, and what the next
// backup builds on. A version is read from here when it is cached, and pulled from the service
// into the cache when not; versions never change, so a cached CAR stays valid. The cache keeps
// within its budget (metadata-cache-trim.ts).

/** A version's tree as read: with its manifest, whatever else. */
interface ReadTree {
  readonly manifest: Record<string, unknown>;
}

/** Reads a version's tree from the file of its metadata CAR, whole or in part. */
export type TreeReader<Tree extends ReadTree> = (file: string) => Promise<Tree>;

/** A pull's bytes received in this attempt, and the CAR's size when the answer states it. */
export type PullProgress = (receivedThisAttempt: number, total: number | null) => void;

export class MetadataCache {
  private readonly home: string;
  private readonly db: StateDb;
  private readonly budgetBytes: number;
  /** The largest metadata CAR a pull takes: the largest a backup makes. */
  private readonly pullLimitBytes: number | undefined;

  constructor(
    home: string,
    db: StateDb,
    budgetBytes = METADATA_CACHE_BUDGET_BYTES,
    pullLimitBytes?: number,
  ) {
    this.home = home;
    this.db = db;
    this.budgetBytes = budgetBytes;
    this.pullLimitBytes = pullLimitBytes;
  }

  /** Where backups stage what they write, and pulls what they fetch, before it is kept. */
  get stagingRoot(): string {
    return path.join(this.home, 'staging');
  }

  private fileOf(versionId: string): string {
    return path.join(this.home, 'metadata', `${versionId}.car`);
  }

  /**
   * Notes what the version holds, as its manifest states it, for `canopy versions`; a home
   * with no room for the note shows the version without it.
   */
  private noteTotals(versionId: string, manifest: Record<string, unknown>): void {
    const files = manifest['file_count'];
    const bytes = manifest['total_bytes'];
    if (!Number.isSafeInteger(files) || !Number.isSafeInteger(bytes)) return;
    // Noted once: a browse reads, and waits on no other process's write to note it again.
    if (versionTotalsOf(this.db, [versionId]).has(versionId)) return;
    keptUnlessDiskFull(() =>
      rememberVersionTotals(this.db, versionId, { files: files as number, bytes: bytes as number }),
    );
  }

  /**
   * Notes what a cached version holds, from its manifest, without counting as a use of it:
   * versions cached before such notes were kept. Returns whether the cache holds it whole.
   */
  async noteCachedTotals(versionId: string): Promise<boolean> {
    let tree;
    try {
      tree = await openBrowsableTree(this.fileOf(versionId));
    } catch (error) {
      // Not cached; or damaged on the disk, or unreadable there, which the next browse of it
      // pulls again.
      const { code } = error as NodeJS.ErrnoException;
      if (code === 'ENOENT' || code === 'EIO' || isEngineError(error, 'protocol')) return false;
      throw error;
    }
    try {
      this.noteTotals(versionId, tree.manifest);
      return true;
    } finally {
      tree.close();
    }
  }

  /** Removes a version's metadata CAR, and the index of its nodes, from the cache. */
  async forget(versionId: string): Promise<void> {
    const file = this.fileOf(versionId);
    await rm(file, { force: true });
    await rm(nodeIndexFileOf(file), { force: true });
  }

  /** A version's tree from the cache, or undefined when it is not there. */
  async cachedTree<Tree extends ReadTree>(
    versionId: string,
    read: TreeReader<Tree>,
  ): Promise<Tree | undefined> {
    const file = this.fileOf(versionId);
    let tree: Tree;
    try {
      tree = await read(file);
    } catch (error) {
      const { code } = error as NodeJS.ErrnoException;
      if (code === 'ENOENT') return undefined;
      if (code !== 'EIO') throw error;
      // The disk failed to read it (a bad sector under it): only a copy, which is removed, to
      // be pulled again in its place, rather than fail every browse of the version. Where even
      // that fails, the disk's failure is told.
      try {
        await this.forget(versionId);
      } catch {
        throw error;
      }
      return undefined;
    }
    this.noteTotals(versionId, tree.manifest);
    try {
      // Used now: the cache's budget removes what was used longest ago first.
      const now = new Date();
      await utimes(file, now, now);
    } catch {
      // Only the order of removal depends on it (a cache on a read-only disk is never trimmed
      // either): the tree read is what was asked for.
    }
    return tree;
  }

  /**
   * Keeps a version's metadata CAR, written to `carFile` on the same file system, by moving it
   * in. Its bytes reach the disk first, so a crash cannot leave a cached CAR cut short. Returns
   * where it is kept.
   */
  async keep(versionId: string, carFile: string): Promise<string> {
    const handle = await open(carFile, 'r');
    try {
      await handle.datasync();
    } finally {
      await handle.close();
    }
    const cached = this.fileOf(versionId);
    mkdirSync(path.dirname(cached), { recursive: true, mode: 0o700 });
    tagAsCache(path.dirname(cached));
    await rename(carFile, cached);
    // The index of its nodes, where the CAR's writer made one: it names the CAR's length, so
    // a crash between the two renames leaves a CAR that is indexed when first browsed. An
    // index left from a copy kept before goes: an index always comes with its own CAR.
    try {
      await rename(nodeIndexFileOf(carFile), nodeIndexFileOf(cached));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      await rm(nodeIndexFileOf(cached), { force: true });
    }
    return cached;
  }

  /**
   * Keeps the cache within its budget: each bucket's active version, as last seen, stays, and
   * so does `justUsed`.
   */
  async trim(justUsed?: string): Promise<void> {
    const keep = new Set(knownActiveVersionIds(this.db));
    if (justUsed !== undefined) keep.add(justUsed);
    try {
      await trimMetadataCache(path.join(this.home, 'metadata'), keep, this.budgetBytes);
    } catch {
      // A CAR that cannot be removed now stays until the next trim, after the next version
      // cached: the backup or the browse that got here has done what was asked of it.
    }
  }

  /**
   * Pulls a version's metadata CAR into a file of the staging folder, and reads it with `read`;
   * `keep` says whether it goes into the cache after, or is removed. Named as staging folders
   * are, by process: another pull of the same version under way (a daemon answers several
   * requests at once) has a name of its own, and what a killed run left there goes first, as
   * at each backup: a device that only restores and browses never backs up to remove it.
   */
  async pulledTree<Tree extends ReadTree>(
    client: ServiceClient,
    versionId: string,
    read: TreeReader<Tree>,
    keep: boolean,
    onPull?: PullProgress,
  ): Promise<Tree> {
    await removeAbandonedStaging(this.stagingRoot, uploadQueue(this.db).stagingDirs());
    const pulled = newStagingDir(this.stagingRoot);
    mkdirSync(path.dirname(pulled), { recursive: true, mode: 0o700 });
    try {
      await client.pullVersionToFile(versionId, pulled, onPull, this.pullLimitBytes);
      const file = keep ? await this.keep(versionId, pulled) : pulled;
      if (keep) await this.trim(versionId);
      try {
        const tree = await read(file);
        this.noteTotals(versionId, tree.manifest);
        return tree;
      } catch (error) {
        // A CAR that does not read back is not kept for the next request to trip on.
        if (keep) await this.forget(versionId);
        throw error;
      }
    } finally {
      // Moved into the cache, or not: a half-written CAR (a full disk), or one only verified,
      // would hold space under a name nothing reads again.
      await rm(pulled, { force: true });
    }
  }

  /** A version's tree as `read` gives it, from the cache when possible. */
  async versionTree<Tree extends ReadTree>(
    client: ServiceClient,
    versionId: string,
    read: TreeReader<Tree>,
    /** Told the bytes of the metadata CAR received, when it is pulled rather than cached. */
    onPull?: PullProgress,
  ): Promise<Tree> {
    try {
      const cached = await this.cachedTree(versionId, read);
      if (cached) return cached;
    } catch (error) {
      // A cached CAR that does not read back (damaged on the disk) is pulled again, and
      // replaced.
      if (!isEngineError(error, 'protocol')) throw error;
    }
    return this.pulledTree(client, versionId, read, true, onPull);
  }
}
