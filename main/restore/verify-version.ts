import { randomInt } from 'node:crypto';
import { EngineError } from '../api/index.ts';
import { CarFormatError, cidText } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { receiveBlocks } from './receive-blocks.ts';

// Re-fetches a sample (or all) of a version's data blocks and checks every one against its CID,
// trusting nothing local: the proof that the version can be restored. An answer cut off on the
// way is asked again for the rest, as a restore does, so a flaky link is not taken for loss.

export interface VerifyResult {
  readonly checked: number;
  readonly total: number;
  readonly bytes: number;
  readonly verifiedAt: number;
}

const BATCH = 64;
const MAX_BLOCK_BYTES = 4 * 1024 * 1024;

export async function verifyVersion(input: {
  client: ServiceClient;
  storageHost: string;
  tree: TreeIndex;
  sample: number | 'all';
  now: () => number;
}): Promise<VerifyResult> {
  const all = Array.from(input.tree.leaves, (leaf) => cidText(leaf.cid));
  let chosen = all;
  if (input.sample !== 'all' && input.sample < all.length) {
    const picked = new Set<string>();
    while (picked.size < input.sample) picked.add(all[randomInt(all.length)] ?? '');
    chosen = [...picked];
  }
  let bytes = 0;
  for (let index = 0; index < chosen.length; index += BATCH) {
    let missing: Set<string>;
    try {
      missing = await receiveBlocks(
        input.client,
        input.storageHost,
        chosen.slice(index, index + BATCH),
        { maxBlockBytes: MAX_BLOCK_BYTES },
        (_cid, block) => {
          bytes += block.length;
        },
      );
    } catch (error) {
      if (error instanceof CarFormatError) {
        throw new EngineError(
          'protocol',
          `verification failed: the server sent a damaged block (${error.message})`,
          { cause: error },
        );
      }
      throw error;
    }
    if (missing.size > 0)
      throw new EngineError(
        'protocol',
        `verification failed: ${missing.size} blocks did not come back`,
      );
  }
  return { checked: chosen.length, total: all.length, bytes, verifiedAt: input.now() };
}
