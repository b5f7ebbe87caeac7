import { statSync } from 'node:fs';
import path from 'node:path';
import { EngineError, formatBytes, isDiskGone, withMoreSaid } from '../api/index.ts';
import { sourcePlace } from '../protocol/index.ts';
import type { ServiceClient, ServiceWait } from '../service/index.ts';
import {
  originalPlace,
  planRestore,
  restoreVersion,
  subtreeIndex,
  versionPathParts,
  type RestoredFileOnDisk,
  type RestorePlan,
  type RestoreResult,
} from '../restore/index.ts';
import {
  openBrowsableTree,
  openingPhase,
  pullPhase,
  type CarFileReading,
  readTreeIndexOfFile,
  type RestoreProgress,
  type TreeIndex,
} from '../uploader/index.ts';
import { RestoreMark } from '../state/index.ts';
import { refuseVersionAndSnapshot } from './bucket-versions.ts';
import { diskGoneError } from './disk-gone-error.ts';
import { toldIfFolderGone } from './folder-gone-error.ts';
import {
  handOverEnded,
  partFilesKept,
  partFilesWaitingIn,
  tidyAfterStop,
  tidyStoppedRestores,
} from './stopped-restores.ts';
import { lockBackupsInto } from './restore-backup-exclusion.ts';
import { toldAsLocalDisk } from './local-disk-error.ts';
import { pacedClient, transferLimitsOf } from './transfer-limits.ts';
import type { EngineParts } from './engine-parts.ts';
import { noteUnavailableBlocks } from './unavailable-blocks.ts';
import { RestoredFilesNotes } from './restored-files-notes.ts';
import { usingTree } from './using-tree.ts';
import { PathsInVersions, type PathInVersion, type TypedPath } from './paths-in-versions.ts';
import type { VersionBrowser } from './version-browser.ts';
import { absolutePath } from './absolute-path.ts';
import type { OutageRiding } from './service-connection.ts';

// Restoring a version, or one file or folder of it, into a folder: by default back where it
// was backed up from. Every restore is marked in the home while it runs, so that one killed
// part-way has the temporaries it left removed by the next, but the large files it was writing,
// which the next restore into the same folder goes on with (stopped-restores.ts).

/** The part files a stopped restore keeps (partFilesKept), and their bytes. */
type PartFilesKept = ReturnType<typeof partFilesKept>;

/** What the restore that failed with an error keeps of the files it was writing, by the error. */
const partFilesKeptBy = new WeakMap<Error, PartFilesKept>();

/** What a stopped restore's failure says of the part files it keeps. */
function keptText({ files, bytes }: PartFilesKept): string {
  return `${files === 1 ? 'the large file it was writing is' : `the ${files} large files it was writing are`} kept as written so far (${formatBytes(bytes)}, under ${files === 1 ? 'a hidden name' : 'hidden names'}): the same restore run again goes on from there`;
}

export interface RestoreRequest extends TypedPath {
  /** The most bytes a second it receives (`--limit-download`); as fast as it can when not given. */
  readonly downloadBytesPerSecond?: number;
  readonly bucket: string;
  readonly version?: string;
  readonly snapshot?: string;
  /** The folder to restore into; by default where the version was backed up from. */
  readonly to?: string;
  readonly overwrite: boolean;
  /** Takes the files and bytes written so far, with an ETA. */
  readonly onProgress?: (progress: RestoreProgress) => void;
  /** Leaves whole chunks of zeros as holes (restoreVersion's `sparse`). */
  readonly sparse?: boolean;
  /** Stops the restore (`stopped`); what it wrote whole stays. */
  readonly signal?: AbortSignal;
  /**
   * Told once as the restore starts to wait out an outage of the service it reached (restarting,
   * or the link down), and once it reached the service again (service-outage.ts).
   */
  readonly onServiceWait?: (wait: ServiceWait) => void;
}

export type RestoredVersion = RestoreResult & {
  /** Files that restores killed part-way had left under temporary names, removed first. */
  readonly leftoversRemoved: number;
  readonly restoredInto: string;
  /**
   * Without `to`, into the bucket's folder now by a path named there: the folder the version
   * held the path in, when that is another (the folder renamed since); null otherwise.
   */
  readonly backedUpFrom: string | null;
  /**
   * Why the next backup of the folder the bucket backs up reads files restored into it again,
   * when some could not be noted for it (RestoredFilesNotes); null when all were, or none went
   * there.
   */
  readonly readAgainBecause: string | null;
};

/** What a restore would do (RestorePlan), of which version, and where. */
export type PlannedRestore = RestorePlan & {
  /**
   * The large files stopped restores into the same folder part-wrote, which the restore would
   * go on with where they hold their files' first leaves, and their bytes (partFilesWaitingIn).
   */
  readonly partFiles: { readonly files: number; readonly bytes: number };
  readonly versionId: string;
  readonly restoredInto: string;
  /** As RestoredVersion.backedUpFrom. */
  readonly backedUpFrom: string | null;
};

/**
 * The folder the version whose `source_label` is `versionLabel` held `asked` in, when not
 * `restoredInto`; null when it is, or the version names no folder.
 */
function folderBackedUpFrom(
  versionLabel: unknown,
  asked: PathInVersion,
  restoredInto: string,
): string | null {
  const source = sourcePlace(versionLabel);
  if (!source) return null;
  const parts = versionPathParts(asked.path, asked.sourceLabel);
  const from = path.join(source.folder, ...parts.slice(0, -1));
  return from === restoredInto ? null : from;
}

/** Whether `dir` is a folder now; a disk pulled out while mounted (ENOTCONN) holds none. */
function isFolderHere(dir: string): boolean {
  try {
    return statSync(dir, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch (error) {
    if (isDiskGone(error)) return false;
    throw error;
  }
}

export class VersionRestorer {
  constructor(
    private readonly parts: EngineParts,
    private readonly browser: VersionBrowser,
  ) {}

  async restore(input: RestoreRequest): Promise<RestoredVersion> {
    // Before any network: the request is wrong whatever the service says.
    refuseVersionAndSnapshot(input);
    try {
      const riding = { onWait: input.onServiceWait };
      return await this.withVersion(input, riding, async ({ client, bucketId, tree, asked }) => {
        const who = await client.whoAmI();
        const result = await this.restoreTree(
          client,
          who.storage_host,
          bucketId,
          tree,
          input,
          asked,
        );
        noteUnavailableBlocks(this.parts.db, bucketId, result.unavailable, this.parts.now());
        return result;
      });
    } catch (error) {
      if (input.signal?.aborted === true) {
        const kept = error instanceof Error ? partFilesKeptBy.get(error) : undefined;
        throw new EngineError(
          'stopped',
          `the restore was stopped: the files it finished are in place, and running it again brings the rest${kept ? `; ${keptText(kept)}` : ''}`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /**
   * What `restore` would do with `input`: what it would write, what is there already, what is in
   * the way, and whether it would be refused. Only the version's list of files is fetched.
   */
  async plan(input: RestoreRequest): Promise<PlannedRestore> {
    refuseVersionAndSnapshot(input);
    // A dry run is over in moments, and is told at once that the service went away.
    return this.withVersion(input, undefined, async ({ versionId, tree, asked }) => {
      const targetDir = this.targetOf(input, tree, asked);
      const partFiles = partFilesWaitingIn(this.parts.deps.home, targetDir);
      const plan = await planRestore({
        tree,
        targetDir,
        keptBytes: partFiles.bytes,
        overwrite: input.overwrite,
        ...(asked.path === undefined ? {} : { subPath: asked.path }),
        ...(input.sparse === true ? { sparse: true } : {}),
      });
      return {
        ...plan,
        partFiles,
        versionId,
        restoredInto: targetDir,
        backedUpFrom: this.backedUpFrom(input, tree, asked, targetDir),
      };
    });
  }

  /**
   * Runs `use` on the version `input` names: its tree, whole, or the part of it `input.path`
   * names (read through the CAR's node index), with where that part lies in it; its requests
   * ride out an outage of the service as `riding` says (ServiceConnection.connect).
   */
  private async withVersion<T>(
    input: RestoreRequest,
    riding: OutageRiding | undefined,
    use: (version: {
      client: ServiceClient;
      versionId: string;
      bucketId: string;
      tree: TreeIndex;
      asked: PathInVersion;
    }) => Promise<T>,
  ): Promise<T> {
    const limits = transferLimitsOf(input);
    const connected = await this.parts.connection.connect({
      signal: input.signal,
      ...(riding ? { ridingOutOutages: riding } : {}),
    });
    const client = pacedClient(connected.client, limits);
    const { versionId, bucketId } = await this.parts.versions.resolve(client, input, true);
    // A version this computer keeps no copy of (a new computer's restore) pulls its list of
    // files first: megabytes, over a slow link minutes, shown as their own phase.
    const onPull = input.onProgress
      ? pullPhase(input.onProgress, () => this.parts.now())
      : undefined;
    // One file or folder needs only its part of the tree, read through the CAR's node index.
    const paths = PathsInVersions.of(this.browser, input);
    let asked: PathInVersion = { path: undefined, sourceLabel: undefined };
    // Reading the list kept on this computer is told too: a tree of many files takes seconds.
    const onOpen = (): CarFileReading | undefined =>
      input.onProgress ? openingPhase(input.onProgress, () => this.parts.now()) : undefined;
    const readTree =
      input.path === undefined
        ? (file: string) => readTreeIndexOfFile(file, onOpen())
        : async (file: string) => {
            const tree = await openBrowsableTree(file, onOpen());
            try {
              asked = await paths.in(tree.manifest['source_label']);
            } catch (error) {
              tree.close();
              throw error;
            }
            return subtreeIndex(tree, asked.path ?? '');
          };
    return usingTree(
      await this.parts.metadata.versionTree(client, versionId, readTree, onPull),
      (tree) => use({ client, versionId, bucketId, tree, asked }),
    );
  }

  /** Where a restore of `asked` in `tree` goes: `input.to`, or where it was backed up from. */
  private targetOf(input: RestoreRequest, tree: TreeIndex, asked: PathInVersion): string {
    return input.to === undefined
      ? originalPlace(asked.sourceLabel ?? tree.manifest['source_label'], asked.path, {
          hostname: this.parts.computer(),
          isFolder: isFolderHere,
        })
      : absolutePath(input.to);
  }

  /** RestoredVersion.backedUpFrom of a restore of `asked` in `tree` into `targetDir`. */
  private backedUpFrom(
    input: RestoreRequest,
    tree: TreeIndex,
    asked: PathInVersion,
    targetDir: string,
  ): string | null {
    return input.to === undefined && asked.sourceLabel !== undefined
      ? folderBackedUpFrom(tree.manifest['source_label'], asked, targetDir)
      : null;
  }

  private async restoreTree(
    client: ServiceClient,
    storageHost: string,
    bucketId: string,
    tree: TreeIndex,
    input: RestoreRequest,
    asked: PathInVersion,
  ): Promise<RestoredVersion> {
    const targetDir = this.targetOf(input, tree, asked);
    const { removed: leftoversRemoved, handedOver } = tidyStoppedRestores(
      this.parts.deps.home,
      targetDir,
    );
    let backups: { release(): void };
    let mark: RestoreMark;
    try {
      backups = lockBackupsInto(this.parts.deps.home, this.parts.db, targetDir);
      try {
        mark = RestoreMark.start(this.parts.deps.home, targetDir);
      } catch (error) {
        backups.release();
        throw error;
      }
    } catch (error) {
      handOverEnded(handedOver);
      throw error;
    }
    /** The part files the stopped restores into this folder left, by the place each is bound for. */
    const partFiles = new Map(
      handedOver.flatMap(({ partFiles: files }) =>
        files.map((file): [string, string] => [file.place, file.temporary]),
      ),
    );
    const notes = RestoredFilesNotes.forRestore(
      this.parts.db,
      bucketId,
      asked.sourceLabel ?? tree.manifest['source_label'],
      targetDir,
      asked.path === undefined,
    );
    let finished = false;
    try {
      const result = await restoreVersion({
        client,
        storageHost,
        tree,
        targetDir,
        overwrite: input.overwrite,
        temporaryToken: mark.token,
        onFolderOpening: (folder) => mark.noteOpenedFolder(folder),
        partFiles,
        onPartFile: (part) => mark.notePartFile(part),
        ...(asked.path === undefined ? {} : { subPath: asked.path }),
        ...(input.to === undefined ? { foldersAboveAsBackedUp: true } : {}),
        ...(this.parts.deps.afterFileRestored
          ? { afterFileWritten: this.parts.deps.afterFileRestored }
          : {}),
        ...(input.onProgress ? { onProgress: input.onProgress } : {}),
        ...(input.sparse === true ? { sparse: true } : {}),
        // As root, what it makes takes the owner of the folder it goes into (a user's home
        // folder, theirs), and no program of it may run as its owner: a version keeps no owners.
        ...(process.getuid?.() === 0 ? { dropSetIdBits: true, ownersFromFolders: true } : {}),
        ...(input.signal ? { signal: input.signal } : {}),
        ...(notes ? { onFileRestored: (file: RestoredFileOnDisk) => notes.add(file) } : {}),
      });
      finished = true;
      return {
        ...result,
        leftoversRemoved,
        restoredInto: targetDir,
        backedUpFrom: this.backedUpFrom(input, tree, asked, targetDir),
        readAgainBecause: notes?.finish() ?? null,
      };
    } catch (error) {
      // What a restore that failed part-way finished is noted too.
      try {
        notes?.finish();
      } catch {
        // The restore's own failure is the one to report; unnoted files are only read again.
      }
      const told = toldAsLocalDisk(
        // A disk that stopped answering is told as such first: its folder may be gone with it.
        toldIfFolderGone(diskGoneError(error, targetDir, 'restore'), targetDir, 'restore'),
        'restore',
        this.parts.db,
        this.parts.connection,
      );
      let kept: PartFilesKept = { files: 0, bytes: 0 };
      try {
        kept = partFilesKept(mark, targetDir);
      } catch {
        // Left untold: the restore's own failure is the one to report.
      }
      if (kept.files === 0 || !(told instanceof EngineError)) throw told;
      // Stopped by its caller, it is told anew (restore), with what it keeps.
      const withKept = input.signal?.aborted === true ? told : withMoreSaid(told, keptText(kept));
      partFilesKeptBy.set(withKept, kept);
      throw withKept;
    } finally {
      try {
        try {
          if (finished) mark.end();
          else this.endUnlessLeft(mark, targetDir);
        } finally {
          handOverEnded(handedOver);
        }
      } finally {
        // After the folders it opened have their modes back.
        backups.release();
      }
    }
  }

  /**
   * Ends the mark of a restore that failed once none of its temporaries are left, nor a folder
   * it opened without its mode given back. It removed those it could as it stopped, but a
   * target whose disk was pulled out keeps the ones written before, and the mark stays so that
   * the next restore removes them once it is back.
   */
  private endUnlessLeft(mark: RestoreMark, targetDir: string): void {
    let someLeft = true;
    try {
      // Its part files are kept for the next restore here to go on with. Folders the restore
      // could not give back as it failed (their disk away) are tried later.
      someLeft = !tidyAfterStop(mark, targetDir).allDone;
    } catch {
      // The restore's own failure is the one to report; the next restore looks again, and
      // says what stops it there.
    } finally {
      if (someLeft) mark.release();
      else mark.end();
    }
  }
}
