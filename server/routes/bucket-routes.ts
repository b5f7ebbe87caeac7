import {
  isUuid,
  parseBucketCreateRequest,
  parseBucketUpdateRequest,
} from '../../main/protocol/index.ts';
import { conflict, notFound } from '../errors.ts';
import { readJsonBody } from '../http/request-body.ts';
import { noContent } from '../http/respond.ts';
import {
  findLiveBucket,
  insertBucket,
  insertBucketKey,
  isNameTaken,
  listLiveBuckets,
  toBucketDto,
  updateBucket,
  type BucketRow,
} from '../store/buckets.ts';
import { deleteBucket, pruneBucket } from '../store/lifecycle.ts';
import { findSnapshot, listSnapshots, markSnapshotDeleted } from '../store/snapshots.ts';
import type { ServiceContext } from '../context.ts';
import type { RouteSpec } from './route-spec.ts';

// §9 buckets and §12 snapshot reads.

export function requireBucket(
  ctx: ServiceContext,
  userId: string,
  id: string | undefined,
): BucketRow {
  const bucket = isUuid(id) ? findLiveBucket(ctx.db, userId, id) : undefined;
  if (!bucket) throw notFound();
  return bucket;
}

export const bucketRoutes: RouteSpec[] = [
  {
    method: 'GET',
    url: '/buckets',
    auth: 'device',
    async handler(ctx, request) {
      return Promise.resolve(listLiveBuckets(ctx.db, request.device.userId));
    },
  },
  {
    method: 'POST',
    url: '/buckets',
    auth: 'device',
    async handler(ctx, request) {
      const input = parseBucketCreateRequest(
        await readJsonBody(request.raw, ctx.options.limits.jsonBodyBytes),
      );
      const userId = request.device.userId;
      const now = ctx.now();
      return ctx.transact(() => {
        if (isNameTaken(ctx.db, userId, input.name, null))
          throw conflict('name: a bucket with this name exists');
        const bucket = insertBucket(
          ctx.db,
          { ownerId: userId, name: input.name, type: input.type, storageClass: input.storageClass },
          now,
        );
        const keyId = insertBucketKey(
          ctx.db,
          {
            bucketId: bucket.id,
            fingerprint: input.bucketKey.fingerprint,
            spki: input.bucketKey.spki,
          },
          now,
        );
        return {
          id: bucket.id,
          name: bucket.name,
          type: bucket.type,
          storage_class: bucket.storage_class,
          initial_bucket_key: {
            id: keyId,
            approved: true,
            fingerprint: input.bucketKey.fingerprint,
          },
        };
      });
    },
  },
  {
    method: 'GET',
    url: '/buckets/:bucket_id',
    auth: 'device',
    async handler(ctx, request) {
      return Promise.resolve(
        toBucketDto(requireBucket(ctx, request.device.userId, request.params['bucket_id'])),
      );
    },
  },
  {
    method: 'PUT',
    url: '/buckets/:bucket_id',
    auth: 'device',
    async handler(ctx, request, reply) {
      const update = parseBucketUpdateRequest(
        await readJsonBody(request.raw, ctx.options.limits.jsonBodyBytes),
      );
      const userId = request.device.userId;
      ctx.transact(() => {
        const bucket = requireBucket(ctx, userId, request.params['bucket_id']);
        if (update.name !== undefined && isNameTaken(ctx.db, userId, update.name, bucket.id)) {
          throw conflict('name: a bucket with this name exists');
        }
        updateBucket(ctx.db, bucket.id, update, ctx.now());
      });
      return noContent(reply);
    },
  },
  {
    method: 'DELETE',
    url: '/buckets/:bucket_id',
    auth: 'device',
    async handler(ctx, request, reply) {
      ctx.transact((deleted) => {
        const bucket = requireBucket(ctx, request.device.userId, request.params['bucket_id']);
        deleted.push(...deleteBucket(ctx.db, bucket, ctx.now()));
      });
      ctx.collectGarbageAfterCommit();
      return Promise.resolve(noContent(reply));
    },
  },
  {
    method: 'GET',
    url: '/buckets/:bucket_id/snapshots',
    auth: 'device',
    async handler(ctx, request) {
      const bucket = requireBucket(ctx, request.device.userId, request.params['bucket_id']);
      return Promise.resolve(listSnapshots(ctx.db, bucket.id));
    },
  },
  {
    method: 'GET',
    url: '/buckets/:bucket_id/snapshots/:snapshot_id',
    auth: 'device',
    async handler(ctx, request) {
      const bucket = requireBucket(ctx, request.device.userId, request.params['bucket_id']);
      const id = request.params['snapshot_id'];
      const snapshot = isUuid(id) ? findSnapshot(ctx.db, bucket.id, id) : undefined;
      if (!snapshot) throw notFound();
      return Promise.resolve(snapshot);
    },
  },
  {
    method: 'DELETE',
    url: '/buckets/:bucket_id/snapshots/:snapshot_id',
    auth: 'device',
    async handler(ctx, request, reply) {
      const userId = request.device.userId;
      ctx.transact((deleted) => {
        const bucket = requireBucket(ctx, userId, request.params['bucket_id']);
        const id = request.params['snapshot_id'];
        const snapshot = isUuid(id) ? findSnapshot(ctx.db, bucket.id, id) : undefined;
        if (!snapshot) throw notFound();
        const now = ctx.now();
        markSnapshotDeleted(ctx.db, snapshot, now);
        // The version, if outdated, is now subject to pruning (§12).
        deleted.push(...pruneBucket(ctx.db, bucket.id, userId, ctx.policy, now));
      });
      ctx.collectGarbageAfterCommit();
      return Promise.resolve(noContent(reply));
    },
  },
];
