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
import { LeafShards } from './leaf-shards.ts';
import { shardHasRoom } from './shard-target.ts';
import { plannedShardBody } from './planned-shard-body.ts';

// Lays data blocks out into shards (CARv1, roots = [first block], at most `targetBytes` of
// blocks and MAX_SHARD_BLOCKS blocks each) without writing them anywhere: each shard is a list
// of where its blocks lie in the source, and its CID is the hash of the bytes the CAR will have.
// The upload reads the source again (plannedShardBody) and checks every block against its CID
// on the way out.
//
// Staging the shards instead writes every new byte to the local disk once more, and needs as
// much free space as the backup sends; reading the source twice costs neither.
//
// The lists go to a sink as they are made (the state database's ShardPlan), not into memory:
// a backup of 400 000 small files plans as many blocks.

/** One block of a planned shard: its CID and where its bytes lie in the source. */
export type PlannedBlock = QueuedBlock;

/**
 * Takes each planned block: its shard's number (0, 1, …) and its position in that shard; and
 * gives them back (the state database's ShardPlan).
 */
export interface PlannedBlockSink {
  add(shard: number, position: number, block: PlannedBlock): void;
  blocksOf(shard: number, from: number, count: number): PlannedBlock[];
  /** Takes the blocks `cids` out of shard `shard`, the rest moved up; how many it keeps. */
  dropBlocks(shard: number, cids: ReadonlySet<string>): number;
}

export interface PlannedShard {
  /** CIDv1 raw sha2-256 of the exact CAR bytes (§11.2). */
  readonly shardCid: CID;
  readonly bytes: number;
}

export class ShardPlanner {
  private current:
    { hash: ReturnType<typeof createHash>; bytes: number; blocks: number } | undefined;
  /** The shards sealed, numbered by their index here. */
  readonly shards: PlannedShard[] = [];
  readonly leafShards = new LeafShards();

  constructor(
    private readonly targetBytes: number,
    private readonly sink: PlannedBlockSink,
  ) {}

  /**
   * `text` is the CID's text, passed in when the caller holds it already; `leaf` is the block's
   * number among the packed tree's leaves.
   */
  add(cid: CID, bytes: Uint8Array, origin: LeafOrigin, leaf: number, text = cidText(cid)): void {
    if (this.current && !shardHasRoom(this.current, bytes.length, this.targetBytes)) this.seal();
    let current = this.current;
    if (!current) {
      current = { hash: createHash('sha256'), bytes: 0, blocks: 0 };
      this.current = current;
      this.write(encodeCarHeader([cid]));
    }
    this.write(encodeCarSectionHead(cid, bytes.length));
    this.write(bytes);
    const shard = this.shards.length;
    this.sink.add(shard, current.blocks, {
      cid: text,
      path: origin.path,
      offset: origin.offset,
      length: bytes.length,
    });
    current.blocks += 1;
    this.leafShards.record(leaf, shard);
  }

  /**
   * Takes the blocks `cids` out of the sealed shard numbered `shard`. The blocks it keeps are
   * read from `sourceDir` again, and checked, to name the shard anew (`source_changed` should
   * one have changed). A shard that keeps none stays as it was, to hold no leaf and never be
   * needed.
   */
  async dropBlocks(shard: number, cids: ReadonlySet<string>, sourceDir: string): Promise<void> {
    if (!this.shards[shard]) throw new Error(`shard ${shard} is not sealed`);
    if (this.sink.dropBlocks(shard, cids) === 0) return;
    const hash = createHash('sha256');
    let bytes = 0;
    const body = plannedShardBody(sourceDir, (from, count) =>
      this.sink.blocksOf(shard, from, count),
    );
    for await (const part of body) {
      hash.update(part);
      bytes += part.length;
    }
    this.shards[shard] = { shardCid: cidFromSha256(RAW_CODEC, hash.digest()), bytes };
  }

  /** Closes the open shard and records its CID. */
  seal(): void {
    const current = this.current;
    if (!current) return;
    this.current = undefined;
    this.shards.push({
      shardCid: cidFromSha256(RAW_CODEC, current.hash.digest()),
      bytes: current.bytes,
    });
  }

  private write(bytes: Uint8Array): void {
    const current = this.current;
    if (!current) throw new Error('no shard open');
    current.hash.update(bytes);
    current.bytes += bytes.length;
  }
}
