import { EngineError, formatBytes, isEngineError } from '../api/index.ts';
import type { LeafSizes } from '../packer/index.ts';
import type { MetadataUploadResult } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import type { UploadQueue } from '../state/index.ts';
import { askMissing } from './ask-missing.ts';

// A push refused for the quota (§11.6 counts a pending version's whole expected_data_size)
// counted every byte the version lays out in shards: all it lacks from the version it builds
// on. The host may hold most of those bytes already: the same files backed up to another
// bucket, by this device or another, or a version whose tree this device could not read, so
// that nothing was known held. Only the host can say, and it says so only under a pushed
// version's authorization (§11.3). So a probe is pushed, expecting a single byte, and asks;
// the version is then pushed again expecting only the bytes the host lacks.
//
// The probe's block set holds what the host said it holds, so none of it can be collected
// before the version's own asking claims it. It is recorded as superseded, and goes with the
// others once the version's upload is queued (backup-source.ts); a run killed before that
// deletes it, as it does every version recorded so.

/** What was pushed within the quota: the version, and the bytes it expects. */
export interface PushedWithinQuota {
  readonly pushed: MetadataUploadResult;
  readonly expectedDataSize: number;
}

/**
 * Pushes the version again, after `refused`, expecting only the bytes of the leaves `inShards`
 * picks that the host lacks. When those are no fewer than `expected`, or the quota has no room
 * for them either, the refusal is thrown again, saying how many bytes the backup adds.
 */
export async function pushWithinQuota(input: {
  readonly client: ServiceClient;
  readonly queue: UploadQueue;
  readonly bucketId: string;
  readonly now: () => number;
  /** Pushes the version's metadata CAR with the same fields, but its expected size. */
  readonly push: (expectedDataSize: number) => Promise<MetadataUploadResult>;
  readonly leaves: LeafSizes;
  readonly inShards: (leaf: number) => boolean;
  readonly expected: number;
  readonly refused: unknown;
}): Promise<PushedWithinQuota> {
  const { client, queue } = input;
  if (input.expected <= 1) throw input.refused;
  const probe = await input.push(1);
  queue.recordSuperseded(probe.id, input.bucketId, input.now());
  try {
    let missingBytes = 0;
    await askMissing(client, probe, input.leaves, input.inShards, (cid) => {
      missingBytes += input.leaves.sizeOfText(cid) ?? 0;
    });
    if (missingBytes >= input.expected) throw quotaFull(input.refused, missingBytes);
    // A version expecting nothing would be active at once, before its blocks were claimed.
    const expectedDataSize = Math.max(1, missingBytes);
    const pushed = await input.push(expectedDataSize).catch((error: unknown) => {
      throw isEngineError(error, 'quota_exceeded') ? quotaFull(error, missingBytes) : error;
    });
    return { pushed, expectedDataSize };
  } catch (error) {
    await dropProbe(client, queue, probe.id);
    throw error;
  }
}

/** The quota's refusal, with what the backup would add: what the user has to make room for. */
function quotaFull(refused: unknown, missingBytes: number): EngineError {
  return new EngineError(
    'quota_exceeded',
    `your storage quota is full: this backup adds ${formatBytes(missingBytes)} (${missingBytes} bytes) the server does not hold yet; delete versions or buckets you no longer need, or ask for a larger quota`,
    { cause: refused },
  );
}

/**
 * Deletes a probe no version came of. Should that fail too, it stays recorded as superseded,
 * and the next backup of the bucket deletes it; the caller's error is the one to tell.
 */
async function dropProbe(client: ServiceClient, queue: UploadQueue, probeId: string) {
  try {
    await client.discardVersion(probeId);
  } catch (error) {
    if (!isEngineError(error, 'not_found')) return;
  }
  queue.forgetSuperseded(probeId);
}
