import { randomInt } from 'node:crypto';
import { EngineError } from '../api/index.ts';
import { CarFormatError, cidText, readCar } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';
import type { TreeIndex } from '../uploader/index.ts';

// Re-fetches a sample (or all) of a version's data blocks and checks every one against its CID,
// trusting nothing local: the proof that the version can be restored.

export interface VerifyResult {
  readonly checked: number;
  readonly total: number;
  readonly bytes: number;
  readonly verifiedAt: number;
}

const BATCH = 64;

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
    const batch = chosen.slice(index, index + BATCH);
    const expected = new Set(batch);
    try {
      for await (const item of readCar(await input.client.blocksCar(input.storageHost, batch), {
        maxBlockBytes: 4 * 1024 * 1024,
      })) {
        if (item.type === 'block') {
          expected.delete(cidText(item.cid));
          bytes += item.bytes.length;
        }
      }
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
    if (expected.size > 0)
      throw new EngineError(
        'protocol',
        `verification failed: ${expected.size} blocks did not come back`,
      );
  }
  return { checked: chosen.length, total: all.length, bytes, verifiedAt: input.now() };
}
