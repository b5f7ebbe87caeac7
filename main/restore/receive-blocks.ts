import { EngineError } from '../api/index.ts';
import {
  type CarBlock,
  CarFormatError,
  cidText,
  readCarCheckingLater,
  type UncheckedCarBlock,
} from '../protocol/index.ts';
import type { AnswerBody, ServiceClient } from '../service/index.ts';

// One batch of blocks through blocks/car (§11.5), each checked against its CID by readCar, or,
// when asked (`uncheckedFrom`), large raw blocks handed on for the taker to check. An answer
// that breaks off part-way (the link dropped, the host restarted) is not the end of the batch:
// the blocks not yet received are asked for again. Failures before an answer starts are
// retried by the service client, with backoff.

/** Answers of one batch that may break part-way before the batch gives up. */
const CUT_ANSWERS_PER_BATCH = 3;

/** Why the host could not give a block back: it sent other bytes, or it holds none. */
export type UnavailableBlock = 'damaged' | 'missing';

/** What a file that needs block `cid` lacks, in words. */
export function unavailableBlockReason(cid: string, why: UnavailableBlock): string {
  return why === 'damaged'
    ? `block ${cid} came back from the server damaged`
    : `the server no longer holds block ${cid}`;
}

/** How the answers' blocks are read. */
export interface BlockReading {
  /** A larger block is refused as hostile. */
  readonly maxBlockBytes: number;
  /**
   * Raw blocks of at least this size are handed on unchecked, for the taker to check (see
   * readCarCheckingLater); without it, every block is checked before it is handed on.
   */
  readonly uncheckedFrom?: number;
}

/**
 * Asks for `cids` and hands each block that comes back to `onBlock`, once per CID; blocks not
 * asked for are dropped. Resolves with the CIDs the host did not send. A third answer cut off
 * rejects with its network error.
 *
 * Without `onUnavailable`, a damaged block rejects with readCar's CarFormatError and a block the
 * host lacks with its 404, as for `canopy verify`. With it, such a block is reported there and
 * the others still come: after a damaged one, the rest are asked for again; on a 404, which
 * the host gives for the whole request (§11.5), the CIDs are halved until it is found.
 */
export async function receiveBlocks(
  client: ServiceClient,
  storageHost: string,
  cids: readonly string[],
  reading: BlockReading,
  onBlock: (cid: string, block: CarBlock | UncheckedCarBlock) => void,
  onUnavailable?: (cid: string, why: UnavailableBlock) => void,
): Promise<Set<string>> {
  const wanted = new Set(cids);
  let cut = 0;
  while (wanted.size > 0) {
    let answer: AnswerBody | undefined;
    try {
      answer = await client.blocksCar(storageHost, [...wanted]);
      const items = readCarCheckingLater(
        answer,
        { maxBlockBytes: reading.maxBlockBytes },
        reading.uncheckedFrom ?? Number.POSITIVE_INFINITY,
      );
      for await (const item of items) {
        if (item.type === 'header') continue;
        const cid = cidText(item.cid);
        if (wanted.delete(cid)) onBlock(cid, item);
      }
      break;
    } catch (error) {
      // The rest of this answer is not read: its connection goes now, not at the idle timeout.
      answer?.cancel();
      if (onUnavailable) {
        const damaged = error instanceof CarFormatError ? error.mismatchedCid : undefined;
        if (damaged !== undefined && wanted.delete(damaged)) {
          onUnavailable(damaged, 'damaged');
          continue;
        }
        if (error instanceof EngineError && error.code === 'not_found')
          return receiveHalves(client, storageHost, [...wanted], reading, onBlock, onUnavailable);
      }
      const broke = error instanceof EngineError && error.code === 'network';
      cut += 1;
      if (!broke || cut >= CUT_ANSWERS_PER_BATCH) throw error;
    }
  }
  return wanted;
}

/** receiveBlocks for CIDs of which the host lacks at least one: each half asked for alone. */
async function receiveHalves(
  client: ServiceClient,
  storageHost: string,
  cids: readonly string[],
  reading: BlockReading,
  onBlock: (cid: string, block: CarBlock | UncheckedCarBlock) => void,
  onUnavailable: (cid: string, why: UnavailableBlock) => void,
): Promise<Set<string>> {
  const [only] = cids;
  if (cids.length === 1 && only !== undefined) {
    onUnavailable(only, 'missing');
    return new Set();
  }
  const half = Math.ceil(cids.length / 2);
  const notSent = new Set<string>();
  for (const part of [cids.slice(0, half), cids.slice(half)]) {
    const left = await receiveBlocks(client, storageHost, part, reading, onBlock, onUnavailable);
    for (const cid of left) notSent.add(cid);
  }
  return notSent;
}
