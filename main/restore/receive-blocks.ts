import { EngineError } from '../api/index.ts';
import { cidText, readCar } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';

// One batch of blocks through blocks/car (§11.5), each checked against its CID by readCar. An
// answer that breaks off part-way (the link dropped, the host restarted) is not the end of the
// batch: the blocks not yet received are asked for again. Failures before an answer starts are
// retried by the service client, with backoff.

/** Answers of one batch that may break part-way before the batch gives up. */
const CUT_ANSWERS_PER_BATCH = 3;

/**
 * Asks for `cids` and hands each block that comes back to `onBlock`, once per CID; blocks not
 * asked for are dropped. Resolves with the CIDs the host did not send. A damaged block
 * rejects with readCar's CarFormatError; a third answer cut off, with its network error.
 */
export async function receiveBlocks(
  client: ServiceClient,
  storageHost: string,
  cids: readonly string[],
  maxBlockBytes: number,
  onBlock: (cid: string, bytes: Uint8Array) => void,
): Promise<Set<string>> {
  const wanted = new Set(cids);
  for (let cut = 0; wanted.size > 0; cut += 1) {
    try {
      const answer = await client.blocksCar(storageHost, [...wanted]);
      for await (const item of readCar(answer, { maxBlockBytes })) {
        if (item.type !== 'block') continue;
        const cid = cidText(item.cid);
        if (wanted.delete(cid)) onBlock(cid, item.bytes);
      }
      break;
    } catch (error) {
      const broke = error instanceof EngineError && error.code === 'network';
      if (!broke || cut + 1 >= CUT_ANSWERS_PER_BATCH) throw error;
    }
  }
  return wanted;
}
