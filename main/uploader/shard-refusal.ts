import { EngineError } from '../api/index.ts';
import { CHUNK_BYTES } from '../packer/index.ts';

// A storage host, or a reverse proxy in front of it, may refuse a shard as too large (413):
// the spec lets a host lower its shard limit (§14), and a proxy's body limit (nginx's
// client_max_body_size, a tunnel's cap) can sit below the shards a fast link gets. The backup
// then drops its pending version and packs again with shards half the refused one's size,
// until they pass. Only a shard of a single 1 MiB leaf cannot be made smaller.

/** A CAR holding one full leaf: its header, the leaf's section head and the leaf. */
const ONE_LEAF_SHARD_BYTES = CHUNK_BYTES + 1024;

/** A shard the host refused as too large; its pending version has been dropped. */
export class ShardRefused extends Error {
  constructor(
    readonly shardBytes: number,
    readonly refusal: EngineError,
  ) {
    super(refusal.message, { cause: refusal });
    this.name = 'ShardRefused';
  }
}

function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/**
 * The shard target to pack again with after `refused`, below `currentTarget`; throws the
 * user's error when no smaller shard can help.
 */
export function targetAfterRefusal(refused: ShardRefused, currentTarget: number): number {
  if (refused.shardBytes <= ONE_LEAF_SHARD_BYTES)
    throw new EngineError(
      'payload_too_large',
      `a backup needs the server to take ${megabytes(ONE_LEAF_SHARD_BYTES)} in one request, ` +
        `and it refused ${megabytes(refused.shardBytes)}: ${refused.refusal.message}`,
      { cause: refused.refusal },
    );
  return Math.min(currentTarget, Math.floor(refused.shardBytes / 2));
}
