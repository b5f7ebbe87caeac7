import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import {
  CarFormatError,
  cidText,
  isUuid,
  MEDIA_CAR,
  MEDIA_JSON,
  MEDIA_MULTIPART,
  mintStorageAuthorization,
  newUuid,
  PART_CAR_UPLOAD,
  PART_REQUEST_DATA,
  parsePushRequestData,
  readCar,
  type MetadataUploadResult,
} from '../../main/protocol/index.ts';
import { ContentChunker, type ContentChunk } from '../blocks/content-chunker.ts';
import type { ServiceContext } from '../context.ts';
import {
  conflict,
  invalidRequest,
  notFound,
  payloadTooLarge,
  ServiceError,
  stalePrevious,
  unsupportedMediaType,
} from '../errors.ts';
import {
  limitedPart,
  partExceeds,
  readMultipart,
  type MultipartPart,
} from '../http/multipart-parts.ts';
import { mediaTypeOf, parseJsonText, readNoBody } from '../http/request-body.ts';
import { noContent } from '../http/respond.ts';
import { evaluateQuota, usageOf } from '../store/accounting.ts';
import { inheritBlockSet } from '../store/block-sets.ts';
import { findLiveBucket } from '../store/buckets.ts';
import { carChunksOf, storeCarChunks } from '../store/metadata-chunks.ts';
import { activate, deleteVersion } from '../store/lifecycle.ts';
import { createSnapshot } from '../store/snapshots.ts';
import { requireUser } from '../store/users.ts';
import { admitIntoKeptFree } from '../store/kept-free.ts';
import {
  findVersion,
  findVisibleVersion,
  insertVersion,
  listVisibleVersions,
  toMetadataDto,
  type VersionRow,
} from '../store/versions.ts';
import { requireBucket } from './bucket-routes.ts';
import type { DeviceRequest, RouteSpec } from './route-spec.ts';

// §10: versions (bucket metadata): list, push, read, delete, pull and explicit snapshots.

function requireVersion(ctx: ServiceContext, userId: string, id: string | undefined): VersionRow {
  const version = isUuid(id) ? findVisibleVersion(ctx.db, userId, id) : undefined;
  if (!version) throw notFound();
  return version;
}

/** A part's media type is optional, but if given it must be the listed one (§10.1). */
function checkPartType(part: MultipartPart, expected: string): void {
  const essence = part.contentType.split(';')[0]?.trim().toLowerCase();
  if (essence !== expected && essence !== 'text/plain') {
    throw invalidRequest(`${part.name}: Content-Type must be ${expected}`);
  }
}

async function nextPart(parts: AsyncGenerator<MultipartPart>): Promise<MultipartPart | undefined> {
  const next = await parts.next();
  return next.done === true ? undefined : next.value;
}

async function readRequestData(part: MultipartPart, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of limitedPart(part, limit)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

interface StagedCar {
  readonly file: string;
  readonly bytes: number;
  /** Its chunks, as the service keeps them (store/metadata-chunks.ts). */
  readonly chunks: readonly ContentChunk[];
}

/**
 * Streams the metadata CAR to a staging file while checking it (§10.1's CAR rules) and
 * cutting it into chunks, so that it is read once.
 */
async function stageMetadataCar(
  ctx: ServiceContext,
  part: MultipartPart,
  metadataCid: string,
): Promise<StagedCar> {
  const file = ctx.blocks.stagingPath();
  const handle = await open(file, 'wx', 0o600);
  const chunker = new ContentChunker();
  let bytes = 0;
  const limit = ctx.options.limits.metadataCarBytes;
  // §10.1 ranks the part's size (413) before its validity (400): measure the rest first.
  const invalidCar = async (reason: string): Promise<ServiceError> =>
    (await partExceeds(part, bytes, limit))
      ? payloadTooLarge(`${PART_CAR_UPLOAD}: larger than ${limit} bytes`)
      : invalidRequest(
          reason.startsWith(PART_CAR_UPLOAD) ? reason : `${PART_CAR_UPLOAD}: ${reason}`,
        );
  try {
    async function* tee(): AsyncGenerator<Buffer> {
      for await (const chunk of limitedPart(part, ctx.options.limits.metadataCarBytes)) {
        await handle.write(chunk);
        chunker.push(chunk);
        bytes += chunk.length;
        yield chunk;
      }
    }
    let firstRoot: string | undefined;
    let hasRootBlock = false;
    try {
      for await (const item of readCar(tee(), {
        maxBlockBytes: ctx.options.limits.blockBytes,
        allowV2: true,
      })) {
        if (item.type === 'header') {
          const [root] = item.roots;
          if (!root) throw invalidRequest(`${PART_CAR_UPLOAD}: CAR has no roots`);
          firstRoot = cidText(root);
          if (firstRoot !== metadataCid)
            throw invalidRequest(`${PART_CAR_UPLOAD}: first root is not metadata_cid`);
        } else if (cidText(item.cid) === firstRoot) {
          hasRootBlock = true;
        }
      }
    } catch (error) {
      if (error instanceof CarFormatError && error.kind === 'block_too_large') {
        throw payloadTooLarge(`${PART_CAR_UPLOAD}: ${error.message}`);
      }
      if (error instanceof CarFormatError) throw await invalidCar(error.message);
      if (error instanceof ServiceError && error.code === 'invalid_request')
        throw await invalidCar(error.message);
      throw error;
    }
    if (!hasRootBlock) throw await invalidCar('CAR holds no block for metadata_cid');
    // Not synced: what is kept is its chunks, written durably from it (metadata-chunk-files.ts).
    return { file, bytes, chunks: chunker.end() };
  } catch (error) {
    ctx.blocks.discard(file);
    throw error;
  } finally {
    await handle.close();
  }
}

async function push(ctx: ServiceContext, request: DeviceRequest): Promise<MetadataUploadResult> {
  const { essence } = mediaTypeOf(request.raw);
  const contentType = request.raw.headers['content-type'] ?? '';
  if (essence !== MEDIA_MULTIPART || !/;\s*boundary=/i.test(contentType))
    throw unsupportedMediaType(MEDIA_MULTIPART);
  const userId = request.device.userId;
  const multipart = readMultipart(request.raw, 3);
  let staged: StagedCar | undefined;
  try {
    const first = await nextPart(multipart.parts);
    if (first?.name !== PART_REQUEST_DATA) {
      throw invalidRequest(`${PART_REQUEST_DATA}: missing or not the first part`);
    }
    checkPartType(first, MEDIA_JSON);
    const requestData = await readRequestData(first, ctx.options.limits.requestDataBytes);
    const input = parsePushRequestData(
      parseJsonText(requestData, PART_REQUEST_DATA),
      ctx.options.limits.validKeys,
    );
    const bucket = findLiveBucket(ctx.db, userId, input.bucketId);
    if (!bucket) throw notFound();
    if (input.previousId !== bucket.active_version_id) throw stalePrevious();

    const second = await nextPart(multipart.parts);
    if (second?.name !== PART_CAR_UPLOAD) throw invalidRequest(`${PART_CAR_UPLOAD}: missing part`);
    checkPartType(second, MEDIA_CAR);
    const metadataCid = cidText(input.metadataCid);
    // A metadata CAR that would fill the disk is refused before it is stored. The data it
    // expects is checked shard by shard, as much of it may be held already.
    const release = admitIntoKeptFree(
      ctx.options.dataDir,
      Math.min(
        Number(request.raw.headers['content-length']) || 0,
        ctx.options.limits.metadataCarBytes,
      ),
      ctx.options.keptFree,
    );
    try {
      staged = await stageMetadataCar(ctx, second, metadataCid);
    } finally {
      release();
    }
    if ((await nextPart(multipart.parts)) !== undefined) {
      throw invalidRequest(`${PART_CAR_UPLOAD}: must be the last part`);
    }

    const now = ctx.now();
    const quota = requireUser(ctx.db, userId).quota_bytes;
    if (quota !== null && usageOf(ctx.db, userId) + staged.bytes + input.expectedDataSize > quota) {
      throw new ServiceError('quota_exceeded', 'this push would exceed your storage quota');
    }
    const versionId = newUuid();
    const windowEndsAt = now + ctx.options.uploadWindowMs;
    const carFile = staged.file;
    const carBytes = staged.bytes;
    const { chunks } = staged;
    let writtenChunks: string | undefined;
    const store = (deleted: string[]): 'active' | 'pending' => {
      insertVersion(
        ctx.db,
        {
          id: versionId,
          bucketId: bucket.id,
          userId,
          rootCid: cidText(input.rootCid),
          metadataCid,
          expectedDataSize: input.expectedDataSize,
          previousId: input.previousId,
          validKeys: input.validKeys,
          carBytes,
          deviceFingerprint: request.device.fingerprint,
          windowEndsAt,
        },
        now,
      );
      inheritBlockSet(
        ctx.db,
        versionId,
        userId,
        input.previousId,
        new Set(input.deletedBlockCids.map(cidText)),
      );
      const version = findVersion(ctx.db, versionId);
      if (!version) throw new Error('version insert lost');
      // Activation can still lose to a concurrent one; then the transaction rolls back whole.
      if (input.expectedDataSize === 0) {
        deleted.push(...activate(ctx.db, version, true, ctx.policy, now));
      } else {
        evaluateQuota(ctx.db, userId, now);
      }
      // Last, as the transaction can still fail before: the chunks the store lacks, or holds
      // damaged.
      const storedCopies = ctx.blocks.metadataChunks.storedCopyCheck();
      try {
        storeCarChunks(
          ctx.db,
          versionId,
          chunks,
          (fresh) => {
            // Written beside the staged CAR: the room kept free must still be there after both.
            const release = admitIntoKeptFree(
              ctx.options.dataDir,
              fresh.reduce((sum, chunk) => sum + chunk.length, 0),
              ctx.options.keptFree,
            );
            try {
              const written = ctx.blocks.metadataChunks.write(carFile, fresh);
              writtenChunks = written.file;
              return written;
            } finally {
              release();
            }
          },
          (stored) => storedCopies.isSound(stored),
        );
      } finally {
        storedCopies.close();
      }
      return input.expectedDataSize === 0 ? 'active' : 'pending';
    };
    let state: 'active' | 'pending';
    try {
      state = ctx.transact(store);
    } catch (error) {
      if (writtenChunks !== undefined) ctx.blocks.metadataChunks.removeUncommitted(writtenChunks);
      throw error;
    }
    return {
      id: versionId,
      state,
      storage_host: ctx.storageHost,
      storage_authorization: mintStorageAuthorization({
        serviceKey: ctx.serviceKey.privateKey,
        serviceFingerprint: ctx.serviceKey.fingerprint,
        userId,
        metadataId: versionId,
        bucketId: bucket.id,
        maxBytes: input.expectedDataSize,
        deviceFingerprint: request.device.fingerprint,
        issuedAtSeconds: Math.floor(now / 1000),
        expiresAtSeconds: Math.floor(windowEndsAt / 1000),
      }),
    };
  } finally {
    multipart.stop();
    if (staged) ctx.blocks.discard(staged.file);
  }
}

export const metadataRoutes: RouteSpec[] = [
  {
    method: 'GET',
    url: '/buckets/metadata',
    auth: 'device',
    async handler(ctx, request) {
      const userId = request.device.userId;
      const bucketId = request.query['bucket_id'];
      if (bucketId === undefined) return Promise.resolve(listVisibleVersions(ctx.db, userId, null));
      const bucket = requireBucket(ctx, userId, bucketId);
      return Promise.resolve(listVisibleVersions(ctx.db, userId, bucket.id));
    },
  },
  { method: 'POST', url: '/buckets/metadata', auth: 'device', handler: push },
  {
    method: 'GET',
    url: '/buckets/metadata/:metadata_id',
    auth: 'device',
    async handler(ctx, request) {
      return Promise.resolve(
        toMetadataDto(requireVersion(ctx, request.device.userId, request.params['metadata_id'])),
      );
    },
  },
  {
    method: 'DELETE',
    url: '/buckets/metadata/:metadata_id',
    auth: 'device',
    async handler(ctx, request, reply) {
      ctx.transact((deleted) => {
        const version = requireVersion(ctx, request.device.userId, request.params['metadata_id']);
        if (version.snapshot_id !== null)
          throw conflict('the version has a snapshot; delete the snapshot first');
        deleted.push(...deleteVersion(ctx.db, version, ctx.policy, ctx.now()));
      });
      ctx.collectGarbageAfterCommit();
      return Promise.resolve(noContent(reply));
    },
  },
  {
    method: 'GET',
    url: '/buckets/metadata/:metadata_id/pull',
    auth: 'device',
    async handler(ctx, request, reply) {
      const version = requireVersion(ctx, request.device.userId, request.params['metadata_id']);
      const chunks = carChunksOf(ctx.db, version.id);
      const body = chunks
        ? Readable.from(
            ctx.blocks.metadataChunks.read(chunks, (chunk) =>
              reply.log.error(
                { version: version.id, chunk: chunk.digest.toString('hex'), file: chunk.file },
                'pull: a chunk of the metadata CAR is damaged on the disk',
              ),
            ),
            { objectMode: false },
          )
        : createReadStream(ctx.blocks.metadataPath(version.id));
      return Promise.resolve(
        reply.type(MEDIA_CAR).header('content-length', version.car_bytes).send(body),
      );
    },
  },
  {
    method: 'POST',
    url: '/buckets/metadata/:metadata_id/snapshot',
    auth: 'device',
    async handler(ctx, request) {
      await readNoBody(request.raw, ctx.options.limits.jsonBodyBytes);
      return ctx.transact(() => {
        const version = requireVersion(ctx, request.device.userId, request.params['metadata_id']);
        if (version.state !== 'active' && version.state !== 'outdated') {
          throw conflict(`a ${version.state} version cannot be snapshotted`);
        }
        if (version.snapshot_id !== null) throw conflict('the version already has a snapshot');
        return createSnapshot(ctx.db, version.id, version.bucket_id, ctx.now());
      });
    },
  },
];
