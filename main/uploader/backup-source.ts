import { randomUUID } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { CarWriter } from '@ipld/car/writer';
import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { packSource } from '../packer/index.ts';
import type { SkippedItem } from '../scanner/index.ts';
import type { ServiceClient } from '../service/index.ts';
import { readTreeIndex, type TreeIndex } from './previous-tree.ts';
import { ShardWriter } from './shard-writer.ts';

// One backup of a source folder into a bucket (§17.4): pack, stage only leaves the previous
// version lacks, push, ask which of those the user already holds, upload the shards that carry
// the rest, complete. A stale previous_id (another device stored first) rebuilds on the new
// active version once.

export interface BackupInput {
  readonly client: ServiceClient;
  readonly bucketId: string;
  readonly sourceDir: string;
  readonly sourceLabel: string;
  readonly deviceFingerprint: string;
  readonly stagingRoot: string;
  readonly now: () => number;
  readonly shardTargetBytes?: number;
  /** Replace a bucket whose versions come from another source (§17.1). */
  readonly replaceSource?: boolean;
}

export interface BackupResult {
  readonly versionId: string;
  readonly files: number;
  readonly bytesScanned: number;
  readonly newBytes: number;
  readonly bytesUploaded: number;
  readonly durationMs: number;
  readonly skipped: readonly SkippedItem[];
}

const MAX_DELETED_IN_REQUEST = 1500; // keeps request-data well under 128 KiB (§11.6 allows a subset)

async function metadataCarBytes(
  blocks: ReadonlyArray<{ cid: CID; bytes: Uint8Array }>,
): Promise<Uint8Array> {
  const [first] = blocks;
  if (!first) throw new Error('no manifest');
  const { writer, out } = CarWriter.create([first.cid]);
  const chunks: Uint8Array[] = [];
  const collected = (async () => {
    for await (const chunk of out) chunks.push(chunk);
  })();
  for (const block of blocks) await writer.put(block);
  await writer.close();
  await collected;
  return Buffer.concat(chunks);
}

async function activePrevious(
  client: ServiceClient,
  bucketId: string,
): Promise<{ id: string; tree: TreeIndex } | null> {
  const active = (await client.listVersions(bucketId)).find(
    (version) => version.state === 'active',
  );
  if (!active) return null;
  return { id: active.id, tree: await readTreeIndex(await client.pullVersion(active.id)) };
}

async function attempt(input: BackupInput, started: number): Promise<BackupResult> {
  const { client } = input;
  const previous = await activePrevious(client, input.bucketId);
  const label = previous?.tree.manifest['source_label'];
  if (
    previous &&
    typeof label === 'string' &&
    label !== input.sourceLabel &&
    input.replaceSource !== true
  ) {
    throw new EngineError(
      'conflict',
      `this bucket holds backups of ${label}; choose another bucket or ask to replace it`,
    );
  }
  const staging = path.join(input.stagingRoot, randomUUID());
  const shards = new ShardWriter(staging, input.shardTargetBytes ?? 64 * 1024 * 1024);
  const skipped: SkippedItem[] = [];
  const candidates = new Map<string, number>();
  try {
    const tree = await packSource({
      sourceDir: input.sourceDir,
      sourceLabel: input.sourceLabel,
      deviceFingerprint: input.deviceFingerprint,
      createdAtSeconds: Math.floor(input.now() / 1000),
      onSkip: (item) => skipped.push(item),
      onLeaf: async (cid, bytes) => {
        if (previous?.tree.leaves.has(cid.toString()) === true) return;
        candidates.set(cid.toString(), bytes.length);
        await shards.add(cid, bytes);
      },
    });
    await shards.seal();
    const expected = [...candidates.values()].reduce((sum, size) => sum + size, 0);
    const deleted = previous
      ? [...previous.tree.leaves.keys()]
          .filter((cid) => !tree.leaves.has(cid))
          .slice(0, MAX_DELETED_IN_REQUEST)
      : [];
    const pushed = await client.pushVersion({
      bucketId: input.bucketId,
      rootCid: tree.rootCid.toString(),
      metadataCid: tree.manifestCid.toString(),
      expectedDataSize: expected,
      previousId: previous?.id ?? null,
      validKeys: [],
      deletedBlockCids: deleted,
      car: await metadataCarBytes(tree.metadataBlocks),
    });
    let uploaded = 0;
    if (pushed.state === 'pending') {
      const cids = [...candidates.keys()];
      const missing = new Set<string>();
      for (let index = 0; index < cids.length; index += 10_000) {
        for (const cid of await client.missingBlocks(
          pushed.storage_host,
          pushed.storage_authorization,
          cids.slice(index, index + 10_000),
        )) {
          missing.add(cid);
        }
      }
      for (const shard of shards.shards) {
        if (!shard.blocks.some((cid) => missing.has(cid))) continue;
        await client.uploadShard(
          pushed.storage_host,
          pushed.storage_authorization,
          pushed.id,
          shard.shardCid.toString(),
          await readFile(shard.file),
        );
        uploaded += shard.bytes;
      }
      try {
        await client.completeVersion(pushed.storage_host, pushed.storage_authorization, pushed.id);
      } catch (error) {
        // Another device stored first: drop this pending version; the caller rebuilds (§10.3).
        if (error instanceof EngineError && error.code === 'stale_previous')
          await client.deleteVersion(pushed.id);
        throw error;
      }
    }
    return {
      versionId: pushed.id,
      files: tree.fileCount,
      bytesScanned: tree.totalBytes,
      newBytes: expected,
      bytesUploaded: uploaded,
      durationMs: input.now() - started,
      skipped,
    };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

export async function backupSource(input: BackupInput): Promise<BackupResult> {
  const started = input.now();
  try {
    return await attempt(input, started);
  } catch (error) {
    if (error instanceof EngineError && error.code === 'stale_previous')
      return attempt(input, started);
    throw error;
  }
}
