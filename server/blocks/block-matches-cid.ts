import { cidBytesOfText, sha256Of } from '../../main/protocol/index.ts';

/**
 * Whether `bytes` are the block that `cid` names (a sha2-256 CID, §3). Read from the text's
 * bytes, without a CID object: a check or a compaction asks this of every block it reads.
 */
export function blockMatchesCid(cid: string, bytes: Uint8Array): boolean {
  const cidBytes = cidBytesOfText(cid);
  // A §3 CID's bytes: version, codec, hash code, digest length, then the 32-byte digest.
  return cidBytes !== undefined && sha256Of(bytes).equals(cidBytes.subarray(4));
}
