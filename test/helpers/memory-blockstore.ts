import type { CID } from 'multiformats/cid';
import { cidText } from '../../main/protocol/index.ts';

// A blockstore in memory, keyed by CID text, for tests that compare the blocks two ways of
// building a node write.

export function memoryBlockstore() {
  const blocks = new Map<string, Uint8Array>();
  return {
    blocks,
    put: (cid: CID, bytes: Uint8Array) => {
      blocks.set(cidText(cid), bytes);
      return Promise.resolve(cid);
    },
  };
}
