import { EngineError } from '../api/index.ts';
import {
  type CarBlock,
  CarFormatError,
  cidText,
  readCarCheckingLater,
  type UncheckedCarBlock,
  UNREADABLE_BLOCK_MSG,
  BLOCKS_NOT_HELD_MSG,
} from '../protocol/index.ts';
import { type AnswerBody, type ServiceClient, serviceMsgOf } from '../service/index.ts';

// One batch of blocks through blocks/car (§11.5), each checked against its CID by readCar, or,
// when asked (`uncheckedFrom`), large raw blocks handed on for the taker to check. An answer
// that breaks off part-way (the link dropped, the host restarted) is not the end of the batch:
// the blocks not yet received are asked for again, for as long as answers bring blocks; only
// answers in a row that break off before a block came count, up to as many as the service
// client tries a request (its retry policy's attempts). Failures before an answer starts are
// retried by the service client, with backoff. A fixed three cut answers per batch failed a
// restore through a link that cut one answer in eight (a batch cut three times in a row, by
// chance); and a batch of 32 MiB could never come through a link that drops every answer after
// a few MiB (a middlebox that limits how long a response may last), though each brought some.
//
// A block that comes back damaged is asked for once more before it counts as damaged: bytes
// flipped on the way (a flaky link, a proxy, memory) or on one read of a failing disk may come
// whole the second time, as restic's tests of a backend that corrupts only the first read expect.

/**
 * Why the host could not give a block back: it sent other bytes, it holds none, or its disk
 * fails to read the one it holds.
 */
export type UnavailableBlock = 'damaged' | 'missing' | 'unreadable';

/** What a file that needs block `cid` lacks, in words. */
export function unavailableBlockReason(cid: string, why: UnavailableBlock): string {
  switch (why) {
    case 'damaged':
      return `block ${cid} came back from the server damaged`;
    case 'missing':
      return `the server no longer holds block ${cid}`;
    case 'unreadable':
      return `the server's disk fails to read block ${cid}`;
  }
}

/**
 * The blocks this project's service named, refusing a request with a 404, as ones its disk
 * fails to read or ones it does not hold; none for another 404.
 */
function blocksNamedIn(error: EngineError): { cids: string[]; why: UnavailableBlock } {
  const msg = serviceMsgOf(error) ?? '';
  for (const [prefix, why] of [
    [UNREADABLE_BLOCK_MSG, 'unreadable'],
    [BLOCKS_NOT_HELD_MSG, 'missing'],
  ] as const) {
    const start = `${prefix}: `;
    if (msg.startsWith(start)) return { cids: msg.slice(start.length).split(' '), why };
  }
  return { cids: [], why: 'missing' };
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

/** What receiveBlocks hands on. */
export interface BlockTaker {
  /** Each block that came back, once per CID. */
  readonly onBlock: (cid: string, block: CarBlock | UncheckedCarBlock) => void;
  /** A block the host sent damaged twice, or does not hold. */
  readonly onUnavailable: (cid: string, why: UnavailableBlock) => void;
  /** A block that came back damaged, then whole when asked for again (before its onBlock). */
  readonly onWholeAgain?: (cid: string) => void;
}

/**
 * Asks for `cids` and hands each block that comes back to the taker, once per CID; blocks not
 * asked for are dropped. Resolves with the CIDs the host did not send. Answers cut off before
 * any block came, as many in a row as the client tries a request, reject with the last one's
 * network error.
 *
 * A block the host sends damaged, does not hold, or cannot read, is reported to the taker and
 * the others still come: after a damaged one, the rest, and it once more, are asked for again;
 * on a 404, which the host gives for the whole request (§11.5), those it names (this project's
 * service does) go and the rest are asked for again, and otherwise the CIDs are halved until
 * each it lacks is found.
 * Other damage to an answer (its framing, not a block's bytes) rejects with readCar's
 * CarFormatError.
 */
export async function receiveBlocks(
  client: ServiceClient,
  storageHost: string,
  cids: readonly string[],
  reading: BlockReading,
  taker: BlockTaker,
  /** Blocks that came back damaged once already, across the halves of a 404. */
  damagedOnce = new Set<string>(),
): Promise<Set<string>> {
  const wanted = new Set(cids);
  /** Answers in a row that broke off before a block came. */
  let cutEmpty = 0;
  while (wanted.size > 0) {
    let answer: AnswerBody | undefined;
    let brought = false;
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
        if (!wanted.delete(cid)) continue;
        brought = true;
        if (damagedOnce.has(cid)) taker.onWholeAgain?.(cid);
        taker.onBlock(cid, item);
      }
      break;
    } catch (error) {
      // The rest of this answer is not read: its connection goes now, not at the idle timeout.
      answer?.cancel();
      const damaged = error instanceof CarFormatError ? error.mismatchedCid : undefined;
      if (damaged !== undefined && wanted.has(damaged)) {
        if (damagedOnce.has(damaged)) {
          wanted.delete(damaged);
          taker.onUnavailable(damaged, 'damaged');
        } else damagedOnce.add(damaged);
        continue;
      }
      if (error instanceof EngineError && error.code === 'not_found') {
        // Named by the host, as ones its disk fails to read or it does not hold: the others
        // are asked for again.
        const named = blocksNamedIn(error);
        const unavailable = named.cids.filter((cid) => wanted.delete(cid));
        for (const cid of unavailable) taker.onUnavailable(cid, named.why);
        if (unavailable.length > 0) {
          // The host answered: the answers it cut short before that were no outage. A run of
          // large blocks on a bad sector is met as a cut answer each, then named.
          cutEmpty = 0;
          continue;
        }
        const [only] = wanted;
        if (wanted.size === 1 && only !== undefined) {
          taker.onUnavailable(only, 'missing');
          return new Set();
        }
        return receiveHalves(client, storageHost, [...wanted], reading, taker, damagedOnce);
      }
      const broke = error instanceof EngineError && error.code === 'network';
      cutEmpty = brought ? 0 : cutEmpty + 1;
      if (!broke || cutEmpty >= client.attemptsPerRequest) throw error;
    }
  }
  return wanted;
}

/**
 * receiveBlocks for two or more CIDs of which the host lacks at least one: each half asked for
 * alone.
 */
async function receiveHalves(
  client: ServiceClient,
  storageHost: string,
  cids: readonly string[],
  reading: BlockReading,
  taker: BlockTaker,
  damagedOnce: Set<string>,
): Promise<Set<string>> {
  const half = Math.ceil(cids.length / 2);
  const notSent = new Set<string>();
  for (const part of [cids.slice(0, half), cids.slice(half)]) {
    const left = await receiveBlocks(client, storageHost, part, reading, taker, damagedOnce);
    for (const cid of left) notSent.add(cid);
  }
  return notSent;
}
