import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import type { ServiceClient, ServiceWait } from '../service/index.ts';
import {
  filesNeedingBlocks,
  unavailableBlockReason,
  verifyVersion,
  type SampleCheck,
  type UnrestorableFile,
  type VerifyResult,
} from '../restore/index.ts';
import {
  isDamagedMetadata,
  openingPhase,
  pullPhase,
  type CarFileReading,
  type CountedProgress,
  readTreeIndexOfFile,
  readTreeLeavesOfFile,
  type TreeLeaves,
  type VerifyProgress,
} from '../uploader/index.ts';
import { LeafSizes } from '../packer/index.ts';
import { noteMetadataToStoreAgain, type SourceFileIndex } from '../state/index.ts';
import type { TreeReader } from './metadata-cache.ts';
import { pacedClient, transferLimitsOf } from './transfer-limits.ts';
import type { EngineParts } from './engine-parts.ts';
import { noteUnavailableBlocks } from './unavailable-blocks.ts';
import { usingTree } from './using-tree.ts';
import { sampleIndexLeaves } from './index-leaf-sample.ts';

// Checking that a version can be restored: its blocks fetched again from the storage host and
// checked against their CIDs, a sample or all of them (`canopy verify`, and the few a backup
// checks once it is stored).

/**
 * What a backup's check of random blocks fetches at most (beyond its first block): over a slow
 * link, more would keep the backup from ending for minutes (4 MiB take 30 s at 1 Mbit/s).
 */
const SAMPLE_CHECK_BYTES = 4 * 1024 * 1024;

/** The blocks `canopy verify` checks without `--all`. */
const VERIFY_SAMPLE_BLOCKS = 64;

export interface VerifyRequest {
  readonly bucket: string;
  readonly version?: string;
  /** The version this snapshot pins, in place of `version`. */
  readonly snapshot?: string;
  readonly all: boolean;
  /** Takes the blocks and bytes checked so far, with an ETA. */
  readonly onProgress?: (progress: VerifyProgress) => void;
  /** Stops the verify (`stopped`). */
  readonly signal?: AbortSignal;
  /** The most bytes a second it receives (`--limit-download`); as fast as it can when not given. */
  readonly downloadBytesPerSecond?: number;
  /**
   * Told once as the verify starts to wait out an outage of the service it reached (restarting,
   * or the link down), and once it reached the service again (service-outage.ts).
   */
  readonly onServiceWait?: (wait: ServiceWait) => void;
}

export type VerifiedVersion = VerifyResult & {
  readonly versionId: string;
  /** The files that cannot be restored whole, named when some blocks did not come back. */
  readonly unrestorable: UnrestorableFile[];
};

/** `leaves` as a version's leaf set. */
function leafSizesOf(leaves: ReadonlyArray<{ cid: CID; size: number }>): LeafSizes {
  const sizes = new LeafSizes();
  for (const { cid, size } of leaves) sizes.add(cid, size);
  return sizes;
}

export class VersionVerifier {
  constructor(private readonly parts: EngineParts) {}

  async verify(input: VerifyRequest): Promise<VerifiedVersion> {
    try {
      const limits = transferLimitsOf(input);
      const { client } = await this.parts.connection.connect({
        signal: input.signal,
        ridingOutOutages: { onWait: input.onServiceWait },
      });
      return await this.verifyWith(pacedClient(client, limits), input);
    } catch (error) {
      if (input.signal?.aborted === true)
        throw new EngineError('stopped', 'the verify was stopped before it checked every block', {
          cause: error,
        });
      throw error;
    }
  }

  /**
   * Fetches `blocks` random blocks of version `versionId` again and checks them: a block the
   * host sent damaged twice, or lost, is noted for the next backup to send again. A failure to
   * check (the link went, the backup was stopped) is told, not thrown: the backup is stored.
   * They are taken from the file index of the folder backed up when it describes that version,
   * of `indexed.files` files, whole (index-leaf-sample.ts); else from the version's tree.
   */
  async checkSample(
    client: ServiceClient,
    bucketId: string,
    versionId: string,
    blocks: number,
    indexed?: { readonly index: SourceFileIndex; readonly files: number },
  ): Promise<SampleCheck> {
    try {
      const who = await client.whoAmI();
      const picked =
        indexed?.index.versionId === versionId
          ? sampleIndexLeaves(indexed.index, blocks, indexed.files)
          : undefined;
      const tree: TreeLeaves = picked
        ? { manifest: {}, leaves: leafSizesOf(picked) }
        : await this.parts.metadata.versionTree(client, versionId, readTreeLeavesOfFile);
      const { checked, verifiedAt, unavailable, wholeOnRetry } = await verifyVersion({
        client,
        storageHost: who.storage_host,
        tree,
        sample: blocks,
        sampleBytes: SAMPLE_CHECK_BYTES,
        now: () => this.parts.now(),
      });
      noteUnavailableBlocks(this.parts.db, bucketId, unavailable, this.parts.now());
      return { checked, verifiedAt, unavailable, wholeOnRetry };
    } catch (error) {
      return { failed: error instanceof Error ? error.message : String(error) };
    }
  }

  private async verifyWith(client: ServiceClient, input: VerifyRequest): Promise<VerifiedVersion> {
    const { versionId, bucketId, active } = await this.parts.versions.resolve(client, input, true);
    // Verification trusts nothing local (not even the metadata cache): pull it fresh. All of
    // the blocks are asked for in the order a restore reads them, which needs the tree's nodes
    // (read from the pulled file, open until the verify ends).
    const { onProgress } = input;
    const now = (): number => this.parts.now();
    /** The fetch or the read of the list of files, told in `phase`: no block is known yet. */
    const listPhase =
      (phase: 'pulling' | 'opening') =>
      ({ bytesDone, bytesTotal, etaSeconds }: CountedProgress<string>): void =>
        onProgress?.({ phase, blocksDone: 0, blocksTotal: 0, bytesDone, bytesTotal, etaSeconds });
    const onPull = onProgress ? pullPhase(listPhase('pulling'), now) : undefined;
    // Its read, once pulled, is told as a restore's is.
    const onOpen = (): CarFileReading | undefined =>
      onProgress ? openingPhase(listPhase('opening'), now) : undefined;
    const pulled = async <Tree extends TreeLeaves>(read: TreeReader<Tree>): Promise<Tree> => {
      try {
        return await this.parts.metadata.pulledTree(client, versionId, read, false, onPull);
      } catch (error) {
        throw this.damagedMetadata(error, { bucketId, versionId, active });
      }
    };
    const withNodes = input.all
      ? await pulled((file) => readTreeIndexOfFile(file, onOpen()))
      : undefined;
    const tree = withNodes ?? (await pulled((file) => readTreeLeavesOfFile(file, onOpen())));
    let result: VerifyResult;
    try {
      const who = await client.whoAmI();
      result = await verifyVersion({
        client,
        storageHost: who.storage_host,
        tree,
        sample: input.all ? 'all' : VERIFY_SAMPLE_BLOCKS,
        now: () => this.parts.now(),
        ...(onProgress ? { onProgress } : {}),
      });
    } finally {
      withNodes?.close();
    }
    noteUnavailableBlocks(this.parts.db, bucketId, result.unavailable, this.parts.now());
    if (result.unavailable.length === 0) return { ...result, versionId, unrestorable: [] };
    // Rare, and the leaves alone do not name files: the whole tree is read only now.
    const reasons = new Map(
      result.unavailable.map(({ cid, why }) => [cid, unavailableBlockReason(cid, why)]),
    );
    const unrestorable = await usingTree(
      await this.parts.metadata.versionTree(client, versionId, readTreeIndexOfFile),
      (indexed) => Promise.resolve(filesNeedingBlocks(indexed, reasons)),
    );
    return { ...result, versionId, unrestorable };
  }

  /**
   * `error` told as a version's metadata damaged on the server, where it is that: of the active
   * version, noted for the bucket's next backup to store a version in its place.
   */
  private damagedMetadata(
    error: unknown,
    version: { readonly bucketId: string; readonly versionId: string; readonly active: boolean },
  ): unknown {
    if (!isDamagedMetadata(error)) return error;
    const { bucketId, versionId, active } = version;
    if (active) noteMetadataToStoreAgain(this.parts.db, bucketId, versionId, this.parts.now());
    return new EngineError(
      'protocol',
      active
        ? `the metadata of version ${versionId} is damaged on the server (${error.cause.message}): the next backup of its folder stores a version in its place`
        : `the metadata of version ${versionId} is damaged on the server (${error.cause.message}): it can no longer be browsed, restored or verified from there`,
      { cause: error },
    );
  }
}
