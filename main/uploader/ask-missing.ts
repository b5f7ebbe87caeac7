import type { LeafSizes } from '../packer/index.ts';
import { cidText } from '../protocol/index.ts';
import type { ServiceClient } from '../service/index.ts';

// Which of a version's leaves the storage host lacks (§11.3). Asking also adds each leaf it
// holds to the version's block set: from then on that block is the version's, and is kept.

/** Where a pushed version's upload goes, and its authorization. */
export interface PushedUpload {
  readonly storage_host: string;
  readonly storage_authorization: string;
}

/**
 * Asks blocks/missing under `pushed`'s authorization about the leaves `asks` picks, in lists of
 * 10 000 (§11.3), each list's CID text made for it and dropped after; the host adds those it
 * holds to the version's set, and `onMissing` takes each it lacks.
 */
export async function askMissing(
  client: ServiceClient,
  pushed: PushedUpload,
  leaves: LeafSizes,
  asks: (leaf: number) => boolean,
  onMissing: (cid: string) => void,
): Promise<void> {
  let asking: string[] = [];
  const ask = async (): Promise<void> => {
    const missing = await client.missingBlocks(
      pushed.storage_host,
      pushed.storage_authorization,
      asking,
    );
    asking = [];
    for (const cid of missing) onMissing(cid);
  };
  for (let leaf = 0; leaf < leaves.count; leaf++) {
    if (!asks(leaf)) continue;
    asking.push(cidText(leaves.cidAt(leaf)));
    if (asking.length === 10_000) await ask();
  }
  if (asking.length > 0) await ask();
}
