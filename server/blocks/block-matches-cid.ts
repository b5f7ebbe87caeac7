import { createHash } from 'node:crypto';
import { parseCidText } from '../../main/protocol/index.ts';

/** Whether `bytes` are the block that `cid` names (a sha2-256 CID, §3). */
export function blockMatchesCid(cid: string, bytes: Uint8Array): boolean {
  const parsed = parseCidText(cid);
  return (
    parsed !== undefined &&
    createHash('sha256').update(bytes).digest().equals(parsed.multihash.digest)
  );
}
