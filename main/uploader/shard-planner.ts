import { createHash } from 'node:crypto';
import type { CID } from 'multiformats/cid';
import {
  cidFromSha256,
  cidText,
  encodeCarHeader,
  encodeCarSectionHead,
  RAW_CODEC,
} from '../protocol/index.ts';
import type { LeafOrigin } from '../packer/index.ts';
import type { QueuedBlock } from '../state/index.ts';

// Lays data blocks out into shards (CARv1, roots = [first block], at most `targetBytes` of
// blocks each) without writing them anywhere: each shard is a list of where its blocks lie in
// the source, and its CID is the hash of the bytes the CAR will have. The upload reads the
// source again (plannedShardBody) and checks every block against its CID on the way out.
//
// Staging the shards instead writes every new byte to the local disk once more, and needs as
// much free space as the backup sends; reading the source twice costs neither.

/** One block of a planned shard: its CID and where its bytes lie in the source. */
export type PlannedBlock = QueuedBlock;

export interface PlannedShard {
  /** CIDv1 raw sha2-256 of the exact CAR bytes (§11.2). */
  readonly shardCid: CID;
  readonly bytes: number;
  readonly blocks: readonly PlannedBlock[];
}

export class ShardPlanner {
  private readonly targetBytes: number;
  private current:
    { hash: ReturnType<typeof createHash>; bytes: number; blocks: PlannedBlock[] } | undefined;
  readonly shards: PlannedShard[] = [];

  constructor(targetBytes: number) {
    this.targetBytes = targetBytes;
  }

  /** `text` is the CID's text, passed in when the caller holds it already. */
  add(cid: CID, bytes: Uint8Array, origin: LeafOrigin, text = cidText(cid)): void {
    if (this.current && this.current.bytes + bytes.length > this.targetBytes) this.seal();
    let current = this.current;
    if (!current) {
      current = { hash: createHash('sha256'), bytes: 0, blocks: [] };
      this.current = current;
      this.write(encodeCarHeader([cid]));
    }
    this.write(encodeCarSectionHead(cid, bytes.length));
    this.write(bytes);
    current.blocks.push({
      cid: text,
      path: origin.path,
      offset: origin.offset,
      length: bytes.length,
    });
  }

  /** Closes the open shard and records its CID. */
  seal(): void {
    const current = this.current;
    if (!current) return;
    this.current = undefined;
    this.shards.push({
      shardCid: cidFromSha256(RAW_CODEC, current.hash.digest()),
      bytes: current.bytes,
      blocks: current.blocks,
    });
  }

  private write(bytes: Uint8Array): void {
    const current = this.current;
    if (!current) throw new Error('no shard open');
    current.hash.update(bytes);
    current.bytes += bytes.length;
  }
}
