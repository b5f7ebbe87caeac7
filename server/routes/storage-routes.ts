import { createHash } from 'node:crypto';
import {
  type CarBlock,
  CarFormatError,
  cidText,
  isUuid,
  MEDIA_CAR,
  parseCidListBody,
  parseCidTextListBody,
  parseCidText,
  parseRawCidText,
  readCar,
  type ShardUploadResult,
  BLOCKS_NOT_HELD_MSG,
  MOST_BLOCKS_NAMED,
  UNREADABLE_BLOCK_MSG,
} from '../../main/protocol/index.ts';
import { carAnswer, type CarAnswerBlock } from '../blocks/car-answer.ts';
import { damagedStoredCopies } from '../blocks/damaged-copies.ts';
import type { PackWriter } from '../blocks/pack-writer.ts';
import type { ServiceContext } from '../context.ts';
import {
  conflict,
  invalidRequest,
  notAuthorized,
  notFound,
  payloadTooLarge,
  unsupportedMediaType,
} from '../errors.ts';
import {
  drainRequest,
  limitedChunks,
  mediaTypeOf,
  readJsonBody,
  readNoBody,
} from '../http/request-body.ts';
import { evaluateQuota } from '../store/accounting.ts';
import { releaseCopies, type ReleasedCopies } from '../store/released-copies.ts';
import { isHeldByUser, takeHeldIntoSet } from '../store/block-sets.ts';
import {
  type BlockLocation,
  findBlock,
  findHeldBlocks,
  storedAmong,
} from '../store/stored-blocks.ts';
import { findBucketById } from '../store/buckets.ts';
import { IncomingBlocks } from '../store/incoming-blocks.ts';
import { admitIntoKeptFree } from '../store/kept-free.ts';
import { insertPack } from '../store/packs.ts';
import { activate } from '../store/lifecycle.ts';
import {
  addReceived,
  findShard,
  findVersion,
  insertShard,
  toMetadataDto,
  type VersionRow,
} from '../store/versions.ts';
import type { RouteSpec, StorageRequest } from './route-spec.ts';

// §11: the storage host. Shards are verified block by block as they stream in, their new
// blocks staged as one pack file, and committed in one transaction with the pack's rename, so
// a shard is stored whole or not at all. A block the host stores already is written again only
// when its stored copy turns out damaged (damaged-copies.ts): the new copy replaces it.

/** §11.1 steps 2 and 3: path shape (404, body unread), then the SA must name this version. */
function checkUploadPath(request: StorageRequest): string {
  const metadataId = request.params['metadata_id'];
  if (!isUuid(metadataId)) throw notFound();
  const shardCid = request.params['shard_cid'];
  if (shardCid !== undefined && !parseRawCidText(shardCid)) throw notFound();
  if (metadataId !== request.storage.metadata_id) throw notAuthorized();
  return metadataId;
}

/** The SA's version, if it and its bucket are not deleted. */
function liveVersionOf(ctx: ServiceContext, id: string): VersionRow {
  const version = findVersion(ctx.db, id);
  const bucket = version ? findBucketById(ctx.db, version.bucket_id) : undefined;
  if (!version || version.state === 'deleted' || !bucket || bucket.deleted_at !== null)
    throw notFound();
  return version;
}

/** The body's declared length; `limit`, the most it may be, when it declares none (chunked). */
function declaredLength(request: StorageRequest, limit: number): number {
  const declared = Number(request.raw.headers['content-length']);
  return Number.isFinite(declared) && declared >= 0 ? Math.min(declared, limit) : limit;
}

/** Blocks, or bytes, of a shard looked up and recorded at once. */
const ARRIVED_BATCH_BLOCKS = 2000;
const ARRIVED_BATCH_BYTES = 1024 * 1024;

async function uploadShard(
  ctx: ServiceContext,
  request: StorageRequest,
): Promise<ShardUploadResult> {
  const metadataId = checkUploadPath(request);
  const shardCid = request.params['shard_cid'] ?? '';
  if (mediaTypeOf(request.raw).essence !== MEDIA_CAR) throw unsupportedMediaType(MEDIA_CAR);
  const version = liveVersionOf(ctx, metadataId);
  const stored = findShard(ctx.db, metadataId, shardCid);
  if (stored) {
    drainRequest(request.raw, Number.POSITIVE_INFINITY);
    return { blocks: stored.blocks, bytes: stored.bytes, received_total: version.received_total };
  }
  if (version.state !== 'pending') throw conflict(`the version is ${version.state}, not pending`);
  // Before a byte of it is read: a shard that would fill the disk is refused whole, counting
  // the shards let in before it and still arriving.
  const release = admitIntoKeptFree(
    ctx.options.dataDir,
    declaredLength(request, ctx.options.limits.shardBytes),
    ctx.options.keptFree,
  );
  try {
    return await receiveShard(ctx, request, metadataId, shardCid);
  } finally {
    release();
  }
}

/** Receives, verifies and stores the body of a shard let in (uploadShard). */
async function receiveShard(
  ctx: ServiceContext,
  request: StorageRequest,
  metadataId: string,
  shardCid: string,
): Promise<ShardUploadResult> {
  const received = new IncomingBlocks(ctx.db);
  /** Blocks stored already whose stored copy differs from the one that came, by CID. */
  const damagedCopies = new Set<string>();
  // The shard's new blocks, in one pack file; opened at the first block the host lacks.
  let pack: PackWriter | undefined;
  // Blocks read but not yet recorded: looked up and recorded a batch at a time, as a shard may
  // hold a million blocks, and a query or a transaction each cost more than the block.
  const arrived: CarBlock[] = [];
  let arrivedBytes = 0;
  const recordArrived = async (): Promise<void> => {
    const cids = arrived.map((block) => cidText(block.cid));
    // Verified against its CID by the reader even when the host holds it (§16.9). A first look
    // outside any write transaction, as most shards name no stored block; those a batch names
    // are looked up again and pinned at once, so that none is collected before the commit.
    let stored = storedAmong(ctx.db, cids);
    if (stored.size > 0) stored = received.pinStored(cids);
    if (stored.size > 0) {
      // A stored copy that differs from the bytes that came is damaged: replaced, not kept.
      const again = arrived.filter((_, index) => stored.has(cids[index] ?? ''));
      const againCids = cids.filter((cid) => stored.has(cid));
      for (const cid of await damagedStoredCopies(ctx.db, ctx.blocks, again, againCids)) {
        stored.delete(cid);
        damagedCopies.add(cid);
      }
    }
    if (cids.some((cid) => !stored.has(cid))) pack ??= await ctx.blocks.startPack();
    const into = pack;
    // A block named again within the batch is passed over. One named again further on is
    // written to the pack again (IncomingBlocks keeps one copy; the other is dead bytes,
    // which compaction drops): a shard of this project's client names each block once.
    const seen = new Set<string>();
    received.batch((add) => {
      for (const [index, block] of arrived.entries()) {
        const cid = cids[index] ?? '';
        if (seen.has(cid)) continue;
        seen.add(cid);
        if (stored.has(cid) || !into) {
          add(cid, block.length, null);
        } else {
          add(cid, block.length, into.length);
          into.append(...block.pieces);
        }
      }
    });
    arrived.length = 0;
    arrivedBytes = 0;
    await into?.ready();
  };
  let packInPlace = false;
  let packCommitted = false;
  /** Damaged copies the shard's replaced, freed once it is committed. */
  let released: ReleasedCopies | undefined;
  const bodyHash = createHash('sha256');
  async function* hashed(): AsyncGenerator<Buffer> {
    for await (const chunk of limitedChunks(request.raw, ctx.options.limits.shardBytes, 'shard')) {
      bodyHash.update(chunk);
      yield chunk;
    }
  }
  try {
    try {
      for await (const item of readCar(hashed(), {
        maxBlockBytes: ctx.options.limits.blockBytes,
      })) {
        if (item.type === 'header') continue;
        arrived.push(item);
        arrivedBytes += item.length;
        if (arrived.length >= ARRIVED_BATCH_BLOCKS || arrivedBytes >= ARRIVED_BATCH_BYTES)
          await recordArrived();
      }
      await recordArrived();
      await pack?.finish();
    } catch (error) {
      if (error instanceof CarFormatError) {
        if (error.kind === 'block_too_large') throw payloadTooLarge(`shard: ${error.message}`);
        throw invalidRequest(`shard: ${error.message}`);
      }
      throw error;
    }
    const expected = parseRawCidText(shardCid);
    if (!expected || !Buffer.from(expected.multihash.digest).equals(bodyHash.digest())) {
      throw invalidRequest('shard_cid: does not match the body');
    }
    const distinct = received.settle();
    const now = ctx.now();
    const result = ctx.transact(() => {
      const current = liveVersionOf(ctx, metadataId);
      const again = findShard(ctx.db, metadataId, shardCid);
      if (again)
        return { blocks: again.blocks, bytes: again.bytes, received_total: current.received_total };
      if (current.state !== 'pending')
        throw conflict(`the version is ${current.state}, not pending`);
      const added = received.markNewToSet(metadataId);
      if (current.received_total + added > request.storage.max_bytes) {
        throw payloadTooLarge('shard: the version would exceed its expected_data_size');
      }
      if (received.anyCollected()) {
        // Held on arrival, and gone although pinned: its bytes were verified but not kept.
        // Pins make this a guard; a client that sends the shard again gets it stored.
        throw conflict('a block was collected during the upload; send the shard again');
      }
      const replacing = pack ? received.replaceStored(pack.id, damagedCopies) : undefined;
      released = replacing && releaseCopies(ctx.db, replacing.replaced);
      const packed = pack
        ? received.storeInPack(pack.id, current.user_id) + (replacing?.bytes ?? 0)
        : 0;
      received.addToBlockSet(metadataId, current.user_id);
      addReceived(ctx.db, metadataId, added);
      insertShard(ctx.db, metadataId, shardCid, distinct.count, distinct.bytes);
      evaluateQuota(ctx.db, current.user_id, now);
      // Blocks another upload stored meanwhile are dead bytes in this pack; compaction drops
      // them. A pack with no block of its own is not kept at all.
      if (pack && packed > 0) {
        insertPack(ctx.db, pack.id, pack.length, packed);
        packInPlace = true;
        ctx.blocks.commitPack(pack);
      }
      return {
        blocks: distinct.count,
        bytes: distinct.bytes,
        received_total: current.received_total + added,
      };
    });
    packCommitted = packInPlace;
    if (released) ctx.removeReleased(released);
    return result;
  } finally {
    try {
      received.drop();
    } finally {
      // A refused shard may still have writes in flight: discard waits for them, then removes
      // the staged pack. A pack renamed into place whose transaction then failed goes too.
      if (pack && !packCommitted) {
        if (packInPlace) ctx.blocks.removeUncommittedPack(pack.id);
        else await pack.discard();
      }
    }
  }
}

/** Where a block the user may read is stored; 404 for any other. */
function readableBlock(ctx: ServiceContext, userId: string, cid: string): BlockLocation {
  const block = isHeldByUser(ctx.db, userId, cid) ? findBlock(ctx.db, cid) : undefined;
  if (!block) throw notFound();
  return block;
}

export const storageRoutes: RouteSpec[] = [
  { method: 'PUT', url: '/upload/:metadata_id/:shard_cid', auth: 'storage', handler: uploadShard },
  {
    method: 'POST',
    url: '/upload/:metadata_id/complete',
    auth: 'storage',
    async handler(ctx, request) {
      const metadataId = checkUploadPath(request);
      await readNoBody(request.raw, ctx.options.limits.jsonBodyBytes);
      return ctx.transact((deleted) => {
        const version = liveVersionOf(ctx, metadataId);
        if (version.state === 'active') return toMetadataDto(version);
        if (version.state !== 'pending')
          throw conflict(`the version is ${version.state}, not pending`);
        deleted.push(...activate(ctx.db, version, true, ctx.policy, ctx.now()));
        const activated = findVersion(ctx.db, metadataId);
        if (!activated) throw new Error('version vanished');
        return toMetadataDto(activated);
      });
    },
  },
  {
    method: 'POST',
    url: '/blocks/missing',
    auth: 'storage',
    async handler(ctx, request) {
      const body = await readJsonBody(request.raw, ctx.options.limits.jsonBodyBytes);
      const cids = parseCidTextListBody(body, 0, ctx.options.limits.cidsPerRequest);
      return ctx.transact(() => {
        const version = liveVersionOf(ctx, request.storage.metadata_id);
        if (version.state !== 'pending')
          throw conflict(`the version is ${version.state}, not pending`);
        // Held blocks join this version's set, so the client may skip them (§11.3).
        return takeHeldIntoSet(ctx.db, version.id, version.user_id, cids);
      });
    },
  },
  {
    method: 'GET',
    url: '/blocks/:cid',
    auth: 'device',
    async handler(ctx, request, reply) {
      const cid = request.params['cid'];
      if (!parseCidText(cid) || cid === undefined) throw notFound();
      const location = readableBlock(ctx, request.device.userId, cid);
      const reader = ctx.blocks.openReader();
      let bytes: Buffer;
      try {
        bytes = await reader.read(location);
      } finally {
        reader.close();
      }
      ctx.countEgress(request.device.userId, bytes.length);
      return reply
        .type('application/octet-stream')
        .header('content-length', bytes.length)
        .send(bytes);
    },
  },
  {
    method: 'POST',
    url: '/blocks/car',
    auth: 'device',
    async handler(ctx, request, reply) {
      const body = await readJsonBody(request.raw, ctx.options.limits.jsonBodyBytes);
      const requested = parseCidListBody(body, 1, ctx.options.limits.cidsPerRequest);
      const userId = request.device.userId;
      const unique = new Map(requested.map((cid) => [cidText(cid), cid]));
      // Every CID is checked before the first byte goes out (§11.5).
      const held = findHeldBlocks(ctx.db, userId, [...unique.keys()]);
      const blocks: CarAnswerBlock[] = [];
      const notHeld: string[] = [];
      for (const [text, cid] of unique) {
        const location = held.get(text);
        if (location) blocks.push({ cid, location });
        else notHeld.push(text);
      }
      // Named, so that the client need not search for them; only the caller's own CIDs, so
      // nothing is told of another user's blocks.
      if (notHeld.length > 0)
        throw notFound(`${BLOCKS_NOT_HELD_MSG}: ${notHeld.slice(0, MOST_BLOCKS_NAMED).join(' ')}`);
      const [root] = requested;
      if (!root) throw invalidRequest('body: must hold at least one CID');
      // Blocks whose read failed on this disk while an earlier answer was sent, and still does.
      const unreadable = await ctx.unreadableBlocks.stillUnreadable(
        ctx.blocks,
        blocks.map((block) => block.location),
      );
      if (unreadable.length > 0) throw notFound(`${UNREADABLE_BLOCK_MSG}: ${unreadable.join(' ')}`);
      const answer = carAnswer(ctx.blocks, root, blocks, {
        onReadFailed: (cids, error) => ctx.unreadableBlocks.noteIfUnreadable(cids, error),
        onCloseFailed: (error) => {
          reply.log.warn({ err: error }, 'blocks/car: a pack would not close after the answer');
        },
      });
      // Written by hand rather than through a stream: every answer is a few hundred block
      // writes, and the stream machinery in between cost more than the writes themselves.
      reply.hijack();
      // Headers set earlier (CORS) are not sent for a hijacked reply unless copied over.
      for (const [name, value] of Object.entries(reply.getHeaders()))
        if (value !== undefined) reply.raw.setHeader(name, value);
      reply.raw.writeHead(200, { 'content-type': MEDIA_CAR, 'content-length': answer.length });
      try {
        await answer.write(reply.raw);
      } catch (error) {
        // Headers are out, so no error body can follow: cut the answer short.
        reply.log.error({ err: error }, 'blocks/car failed mid-answer');
        reply.raw.destroy();
        // The hijacked reply itself: nothing more is sent for it (app.ts).
        return reply;
      }
      if (reply.raw.writableFinished || reply.raw.writableEnded)
        ctx.countEgress(userId, answer.length);
      return reply;
    },
  },
];
