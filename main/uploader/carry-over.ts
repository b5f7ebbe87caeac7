import { existsSync } from 'node:fs';
import { isEngineError } from '../api/index.ts';
import type { MetadataUploadResult } from '../protocol/index.ts';
import type { LeafSizes } from '../packer/index.ts';
import type { QueuedUpload } from '../state/index.ts';
import { readTreeLeavesOfFile } from './previous-tree.ts';
import type { WindowEnding } from './upload-window.ts';
import { askMissing } from './ask-missing.ts';
import type { BackupInput } from './backup-input.ts';
import { removeStaging } from './queued-upload-files.ts';
import { pushFromFile } from './metadata-push.ts';

// An upload nearing the end of its window goes on as a new version of the same tree, pushed
// again from the same metadata CAR (upload-window.ts says when): days of uploading over a slow
// link read each file once.

/** The fields a version was pushed with, but its metadata CAR, which is in its file. */
export interface PushedAs {
  readonly rootCid: string;
  readonly metadataCid: string;
  readonly expectedDataSize: number;
  readonly previousId: string | null;
  readonly deletedBlockCids: readonly string[];
}

/**
 * Leaves `upload`'s version pending, holding what it received, for a version yet to be packed
 * to take over: recorded as superseded, so that one is deleted once that version's upload is
 * queued, by this run or the next (dropSuperseded).
 */
export async function supersedeUpload(input: BackupInput, upload: QueuedUpload): Promise<void> {
  input.queue.supersede(upload.version_id, input.now());
  await removeStaging(upload.staging_dir);
}

/**
 * Goes on with an upload nearing its window's end as a new version of the same tree, pushed
 * again from the same metadata CAR: what the first version received is claimed through
 * blocks/missing, and the shards still to send are the ones queued, read from the source again.
 * Packing the source anew would read every file again, once per window of a backup that takes
 * days. Returns the new version's upload, with the old one recorded as superseded; null when
 * the shards queued do not carry every leaf the host lacks (staged shards, or a block the host
 * let go), which leaves the old one superseded for the caller to pack anew.
 */
export async function carryOver(
  input: BackupInput,
  upload: QueuedUpload,
  ending: WindowEnding,
  pushed: { readonly pushedAs: PushedAs | null; readonly metadataFile: string | null },
  /** The leaves of the version it builds on; undefined for none. */
  previousLeaves: LeafSizes | undefined,
): Promise<QueuedUpload | null> {
  const { pushedAs, metadataFile } = pushed;
  // A window that let no shard through is too short for this backup (backupSource's renew).
  if (ending.confirmed === 0 || !pushedAs || metadataFile === null || upload.source_dir === null) {
    await supersedeUpload(input, upload);
    return null;
  }
  let again: MetadataUploadResult | undefined;
  try {
    const { leaves } = await readTreeLeavesOfFile(metadataFile);
    /** The leaves the version lacks from the one it builds on. */
    const isCandidate = (leaf: number): boolean => previousLeaves?.has(leaves.cidAt(leaf)) !== true;
    const push = async (expectedDataSize: number): Promise<MetadataUploadResult> => {
      input.queue.notePush(input.bucketId, pushedAs.metadataCid, input.now());
      const pushedAgain = await pushFromFile(
        input,
        { ...pushedAs, expectedDataSize },
        metadataFile,
        upload.files,
      );
      if (pushedAgain.state !== 'pending')
        throw new Error(`a version pushed again with data to receive is ${pushedAgain.state}`);
      return pushedAgain;
    };
    /** With a bridge: at most these leaves may be missing, as the new version expects no more. */
    let allowedMissing: ReadonlySet<string> | undefined;
    try {
      again = await push(pushedAs.expectedDataSize);
    } catch (error) {
      if (!isEngineError(error, 'quota_exceeded')) throw error;
      const bridged = await pushThroughBridge(input, upload, leaves, isCandidate, push);
      again = bridged.pushed;
      allowedMissing = bridged.missing;
    }
    const carried = again;
    // Every leaf the version lacks must be held, or in a shard still to send, before the new
    // version may complete.
    const missing = new Set<string>();
    await askMissing(input.client, carried, leaves, isCandidate, (cid) => missing.add(cid));
    const beyondExpected = [...missing].some((cid) => allowedMissing?.has(cid) === false);
    // Blocks to send again are held, as far as the host knows, and the new version inherits
    // them: a shard carrying one goes unless the host confirmed it (and replaced its damaged
    // copy then). A block to send again in no shard queued packs anew.
    const resend = new Set(
      [...(input.resendLeaves ?? [])].filter((cid) => leaves.indexOfText(cid) >= 0),
    );
    const confirmed = new Set(
      input.queue
        .shardsOf(upload.version_id)
        .filter((shard) => shard.confirmed !== 0)
        .map((shard) => shard.shard_cid),
    );
    // The shards that carry them: sent again even if the old version's host confirmed them.
    const needed = new Set<string>();
    for (const block of input.queue.blocksOfUpload(upload.version_id)) {
      if (resend.delete(block.cid) && !confirmed.has(block.shard_cid)) needed.add(block.shard_cid);
      if (!missing.has(block.cid)) continue;
      needed.add(block.shard_cid);
      missing.delete(block.cid);
    }
    if (missing.size > 0 || resend.size > 0 || beyondExpected) {
      await input.client.discardVersion(carried.id);
      await supersedeUpload(input, upload);
      return null;
    }
    const next: QueuedUpload = {
      ...upload,
      version_id: carried.id,
      storage_host: carried.storage_host,
      storage_authorization: carried.storage_authorization,
      created_at: input.now(),
    };
    input.queue.carryOver(upload.version_id, next, needed, input.now());
    input.queue.forgetPush(input.bucketId, pushedAs.metadataCid);
    return next;
  } catch (error) {
    // The caller sees why (another device stored first, a full quota, a dead network); the
    // old version is left to the next version queued.
    if (input.queue.pendingFor(input.bucketId)?.version_id === upload.version_id)
      await supersedeUpload(input, upload);
    if (again?.state === 'pending') {
      try {
        await input.client.discardVersion(again.id);
      } catch {
        // Left pending, it becomes upload_failed when its window ends (§10.2).
      }
    }
    throw error;
  }
}

/** What a queued upload was pushed with (QueuedUpload.pushed_as); null when not recorded. */
export function pushedAsOf(upload: QueuedUpload): PushedAs | null {
  if (upload.pushed_as === null) return null;
  return JSON.parse(upload.pushed_as) as PushedAs;
}

/** Whether `upload` can go on as a new version of the same tree (carryOver). */
export function canCarryOver(upload: QueuedUpload): boolean {
  return (
    upload.source_dir !== null &&
    upload.pushed_as !== null &&
    upload.metadata_file !== null &&
    existsSync(upload.metadata_file)
  );
}

/**
 * Pushes the tree again when the quota has no room for both the old version's unsent rest and
 * the new version's whole expected size (§11.6 counts each pending version's): first as a
 * bridge expecting a single byte, which claims what the old version received; then, with the
 * old version deleted and its unsent rest no longer counted, as the version that takes the
 * upload over, expecting only the bytes still missing. The bridge is recorded as superseded,
 * and goes once the new version's upload is queued. Returns that version, and the leaves
 * missing when the bridge asked: the most it may need.
 */
async function pushThroughBridge(
  input: BackupInput,
  upload: QueuedUpload,
  leaves: LeafSizes,
  isCandidate: (leaf: number) => boolean,
  push: (expectedDataSize: number) => Promise<MetadataUploadResult>,
): Promise<{ pushed: MetadataUploadResult; missing: ReadonlySet<string> }> {
  const bridge = await push(1);
  input.queue.recordSuperseded(bridge.id, input.bucketId, input.now());
  const missing = new Set<string>();
  await askMissing(input.client, bridge, leaves, isCandidate, (cid) => missing.add(cid));
  // What the old version received is the bridge's too now.
  await input.client.discardVersion(upload.version_id);
  let missingBytes = 0;
  for (const cid of missing) missingBytes += leaves.sizeOfText(cid) ?? 0;
  // A version expecting nothing would be active at once, before its completion is checked.
  return { pushed: await push(Math.max(1, missingBytes)), missing };
}
